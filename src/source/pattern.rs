//! Dataset specs that name many files: brace patterns (`train-{000000..000146}.tar`).

/// Expands brace patterns: `a-{00..03}.tar` -> `a-00.tar` .. `a-03.tar` (zero padding kept,
/// as wide as the first bound), `{x,y}` -> both; several braces multiply out, left to right.
///
/// # Errors
/// An unclosed brace or a range that is not two non-negative integers in increasing order.
pub fn expand_braces(pattern: &str) -> Result<Vec<String>, String> {
    let Some(open) = pattern.find('{') else {
        return Ok(vec![pattern.to_string()]);
    };
    let close = pattern[open..]
        .find('}')
        .map(|i| open + i)
        .ok_or_else(|| "an unclosed '{'".to_string())?;
    let (head, body, tail) = (
        &pattern[..open],
        &pattern[open + 1..close],
        &pattern[close + 1..],
    );
    let choices: Vec<String> = if let Some((a, b)) = body.split_once("..") {
        let (lo, hi) = (
            a.parse::<u64>()
                .map_err(|_| format!("range start {a:?} is not a number"))?,
            b.parse::<u64>()
                .map_err(|_| format!("range end {b:?} is not a number"))?,
        );
        if lo > hi {
            return Err(format!("range {a}..{b} runs backwards"));
        }
        if hi - lo > 10_000_000 {
            return Err(format!("range {a}..{b} names more than 10 million shards"));
        }
        let width = a.len();
        (lo..=hi).map(|n| format!("{n:0width$}")).collect()
    } else {
        body.split(',').map(str::to_string).collect()
    };
    let rest = expand_braces(tail)?;
    Ok(choices
        .iter()
        .flat_map(|c| rest.iter().map(move |r| format!("{head}{c}{r}")))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn braces_expand_ranges_with_padding_and_lists() {
        assert_eq!(expand_braces("a.tar").unwrap(), ["a.tar"]);
        assert_eq!(
            expand_braces("s-{008..011}.tar").unwrap(),
            ["s-008.tar", "s-009.tar", "s-010.tar", "s-011.tar"]
        );
        assert_eq!(
            expand_braces("{a,b}/x-{1..2}").unwrap(),
            ["a/x-1", "a/x-2", "b/x-1", "b/x-2"]
        );
        assert!(expand_braces("x-{1..").is_err());
        assert!(expand_braces("x-{3..1}").is_err());
        assert!(expand_braces("x-{a..b}").is_err());
    }
}
