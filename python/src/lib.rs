//! `rudder._native`: rudder's task store for Python (the `rudder` package
//! re-exports it; `python/rudder/_native.pyi` is its typed interface).
//!
//! - [`store`]: `rudder.Store`, every store operation of the CLI, the GIL
//!   released during store I/O;
//! - [`task`]: the typed answers (`Task`, `Outcome`, the reports);
//! - [`convert`]: JSON values to and from Python, losslessly, refusing what
//!   JSON cannot express with the path of the culprit;
//! - [`errors`]: the library's errors as the exceptions of `rudder.errors`;
//! - [`wait`]: `Store.wait` on the change feed, interruptible by Ctrl-C;
//! - [`worker`]: the worker API (`Store.worker`, `Worker`, `Job`,
//!   `Answer`), bound to the library's `rudder_store::worker`.

use pyo3::prelude::*;

mod convert;
mod errors;
mod exceptions;
mod store;
mod task;
mod wait;
mod worker;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<store::PyStore>()?;
    m.add_class::<task::PyTask>()?;
    m.add_class::<task::PyOutcome>()?;
    m.add_class::<task::PyHistoryEntry>()?;
    m.add_class::<task::PyReclaimReport>()?;
    m.add_class::<task::PyReclaimed>()?;
    m.add_class::<task::PySkipped>()?;
    m.add_class::<task::PyPruneReport>()?;
    m.add_class::<task::PyPruned>()?;
    m.add_class::<worker::PyWorker>()?;
    m.add_class::<worker::PyJob>()?;
    m.add_class::<worker::PyAnswer>()?;
    m.add("DEFAULT_LEASE_SECONDS", store::DEFAULT_LEASE.as_secs_f64())?;
    m.add("MAX_VALUE_DEPTH", rudder_store::MAX_VALUE_DEPTH)?;
    Ok(())
}
