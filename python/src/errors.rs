//! Rust errors as Python exceptions. Bad settings are `ValueError`; a file or folder that
//! cannot be opened is `OSError`; a sample that fails under `on_error="fail"` is
//! `hpuload.SampleError` naming the file; a pipeline that cannot run is
//! `hpuload.PipelineError` (a `ValueError`); the error budget is `hpuload.ErrorBudgetExceeded`;
//! everything else is `hpuload.LoaderError`. All carry the Rust message.

use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

create_exception!(
    hpuload,
    LoaderError,
    PyRuntimeError,
    "The loader failed (device, thread or data error)."
);
create_exception!(
    hpuload,
    SampleError,
    LoaderError,
    "A sample could not be loaded; `args` = (message, path, reason)."
);
create_exception!(
    hpuload,
    ErrorBudgetExceeded,
    LoaderError,
    "More samples failed in an epoch than the error budget allows."
);

create_exception!(
    hpuload,
    PipelineError,
    PyValueError,
    "The pipeline cannot be run as given (an op, its parameters or their order)."
);

pub fn to_py(e: hpuload::Error) -> PyErr {
    let message = e.to_string();
    match e {
        hpuload::Error::Pipeline { .. } => PipelineError::new_err(message),
        hpuload::Error::Config { .. } => PyValueError::new_err(message),
        hpuload::Error::Io { path, source } => {
            PyOSError::new_err((
                source.raw_os_error().unwrap_or(0),
                message,
                // A string, not a `pathlib.Path`, which would fold a URL's `//`.
                path.to_string_lossy().into_owned(),
            ))
        }
        hpuload::Error::Manifest { .. }
        | hpuload::Error::EmptyDataset { .. }
        | hpuload::Error::Format { .. } => PyValueError::new_err(message),
        hpuload::Error::Sample(s) => SampleError::new_err((
            message,
            s.path.to_string_lossy().into_owned(),
            s.reason().to_string(),
        )),
        hpuload::Error::ErrorBudget { .. } => ErrorBudgetExceeded::new_err(message),
        _ => LoaderError::new_err(message),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("LoaderError", py.get_type::<LoaderError>())?;
    m.add("SampleError", py.get_type::<SampleError>())?;
    m.add("ErrorBudgetExceeded", py.get_type::<ErrorBudgetExceeded>())?;
    m.add("PipelineError", py.get_type::<PipelineError>())?;
    Ok(())
}
