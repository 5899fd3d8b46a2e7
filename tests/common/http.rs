//! A small HTTP/1.1 file server on 127.0.0.1 for the object-storage tests: GET (with `Range`)
//! and HEAD of the files in one folder, with faults injected on demand (dropped connections,
//! 500s, stalls, 403s). It stops when dropped, and every loop in it is bounded in time.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the next requests get instead of their file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Close the connection without an answer.
    Drop,
    /// `500 Internal Server Error`.
    Status500,
    /// Send the headers and half the body, then stall for this long and close.
    Stall(Duration),
    /// `403 Forbidden` (permanent: not retried).
    Forbidden,
}

#[derive(Default)]
struct State {
    /// Faults to inject, consumed one per matching request.
    faults: Mutex<Vec<Fault>>,
    /// Only requests whose path contains this get faults (all when empty).
    fault_filter: Mutex<String>,
    requests: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    faults_served: AtomicUsize,
    /// Extra time spent on each request, so that concurrent ones overlap.
    delay_ms: AtomicUsize,
}

/// The server; stops (and joins its threads) when dropped.
pub struct HttpServer {
    pub url: String,
    state: Arc<State>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

/// The longest a test server lives, whatever the test does.
const LIFETIME: Duration = Duration::from_secs(300);

impl HttpServer {
    /// Serves the files under `root`.
    pub fn start(root: PathBuf) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(State::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (Arc::clone(&state), Arc::clone(&stop));
        let accept = std::thread::spawn(move || {
            let born = Instant::now();
            let mut connections = Vec::new();
            while !st.load(Ordering::Relaxed) && born.elapsed() < LIFETIME {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let (s, root, st) = (Arc::clone(&s), root.clone(), Arc::clone(&st));
                        connections.push(std::thread::spawn(move || serve(conn, &root, &s, &st)));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
            for c in connections {
                let _ = c.join();
            }
        });
        Self {
            url,
            state,
            stop,
            accept: Some(accept),
        }
    }

    /// Queues faults for the next requests whose path contains `filter` ("" for any).
    pub fn inject(&self, filter: &str, faults: &[Fault]) {
        *self.state.fault_filter.lock().unwrap() = filter.to_string();
        let mut queued = self.state.faults.lock().unwrap();
        queued.clear();
        queued.extend(faults.iter().rev());
    }

    /// Keeps every request busy this long (to make concurrent requests overlap).
    pub fn delay(&self, ms: usize) {
        self.state.delay_ms.store(ms, Ordering::Relaxed);
    }

    pub fn requests(&self) -> usize {
        self.state.requests.load(Ordering::Relaxed)
    }

    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::Relaxed)
    }

    pub fn faults_served(&self) -> usize {
        self.state.faults_served.load(Ordering::Relaxed)
    }

    pub fn faults_left(&self) -> usize {
        self.state.faults.lock().unwrap().len()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn serve(conn: TcpStream, root: &std::path::Path, state: &State, stop: &AtomicBool) {
    let _ = conn.set_nodelay(true);
    let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut out = conn;
    let born = Instant::now();
    // Keep-alive: one request after another until the client closes or the server stops.
    while !stop.load(Ordering::Relaxed) && born.elapsed() < LIFETIME {
        let mut head: Vec<String> = Vec::new();
        let mut line = String::new();
        loop {
            // On a timeout `line` keeps what was read so far; the next call goes on from there.
            match reader.read_line(&mut line) {
                Ok(0) => return,
                Ok(_) => {
                    let done = std::mem::take(&mut line);
                    if done.trim_end().is_empty() {
                        if head.is_empty() {
                            continue;
                        }
                        break;
                    }
                    head.push(done.trim_end().to_string());
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    if stop.load(Ordering::Relaxed) || born.elapsed() > LIFETIME {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
        state.requests.fetch_add(1, Ordering::Relaxed);
        if !answer(&head, &mut out, root, state) {
            return;
        }
    }
}

/// Answers one request; `false` when the connection is to be closed.
fn answer(head: &[String], out: &mut TcpStream, root: &std::path::Path, state: &State) -> bool {
    let mut parts = head[0].split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or("/"));
    // In flight: from the request's arrival until its answer starts (the client cannot send
    // its next request before it has this answer).
    let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let delay = state.delay_ms.load(Ordering::Relaxed);
    if delay > 0 {
        std::thread::sleep(Duration::from_millis(delay as u64));
    }
    state.in_flight.fetch_sub(1, Ordering::SeqCst);
    let fault = {
        let filter = state.fault_filter.lock().unwrap();
        let mut faults = state.faults.lock().unwrap();
        if target.contains(filter.as_str()) {
            faults.pop()
        } else {
            None
        }
    };
    let path = root.join(target.trim_start_matches('/'));
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(_) => return reply(out, "404 Not Found", &[], b"not found"),
    };
    if let Some(f) = fault {
        state.faults_served.fetch_add(1, Ordering::Relaxed);
        match f {
            Fault::Drop => return false,
            Fault::Status500 => return reply(out, "500 Internal Server Error", &[], b"oops"),
            Fault::Forbidden => return reply(out, "403 Forbidden", &[], b"no"),
            Fault::Stall(_) => {}
        }
    }
    let range = head.iter().find_map(|h| {
        let (name, value) = h.split_once(':')?;
        if !name.eq_ignore_ascii_case("range") {
            return None;
        }
        let spec = value.trim().strip_prefix("bytes=")?;
        let (a, b) = spec.split_once('-')?;
        let start: usize = a.parse().ok()?;
        let end: usize = if b.is_empty() {
            data.len().saturating_sub(1)
        } else {
            b.parse().ok()?
        };
        Some((start, end))
    });
    let etag = format!("\"{}\"", data.len());
    let (status, body, mut headers) = match range {
        Some((start, _)) if start >= data.len() => {
            let cr = format!("bytes */{}", data.len());
            return reply(
                out,
                "416 Range Not Satisfiable",
                &[("Content-Range", cr)],
                b"",
            );
        }
        Some((start, end)) => {
            let end = end.min(data.len() - 1);
            (
                "206 Partial Content",
                &data[start..=end],
                vec![(
                    "Content-Range",
                    format!("bytes {start}-{end}/{}", data.len()),
                )],
            )
        }
        None => ("200 OK", &data[..], vec![]),
    };
    headers.push(("ETag", etag));
    headers.push(("Last-Modified", "Mon, 23 Nov 2026 12:00:00 GMT".into()));
    headers.push(("Accept-Ranges", "bytes".into()));
    if method == "HEAD" {
        return reply_head(out, status, &headers, body.len());
    }
    if let Some(Fault::Stall(t)) = fault {
        let _ = write_head(out, status, &headers, body.len());
        let _ = out.write_all(&body[..body.len() / 2]);
        let _ = out.flush();
        std::thread::sleep(t);
        return false;
    }
    reply(out, status, &headers, body)
}

fn write_head(
    out: &mut TcpStream,
    status: &str,
    headers: &[(&str, String)],
    len: usize,
) -> std::io::Result<()> {
    let mut text = format!("HTTP/1.1 {status}\r\nContent-Length: {len}\r\n");
    for (k, v) in headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    text.push_str("\r\n");
    out.write_all(text.as_bytes())
}

fn reply_head(out: &mut TcpStream, status: &str, headers: &[(&str, String)], len: usize) -> bool {
    write_head(out, status, headers, len).is_ok()
}

fn reply(out: &mut TcpStream, status: &str, headers: &[(&str, String)], body: &[u8]) -> bool {
    write_head(out, status, headers, body.len()).is_ok() && out.write_all(body).is_ok()
}
