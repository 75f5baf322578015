//! PyO3 bindings: type conversion only. Batch work runs with the GIL released (`py.detach`).

/// Adds `#[pyfunction]`s and `#[pyclass]`es to a module: `add_all!(m, fn a, b; class C, D)`.
macro_rules! add_all {
    ($m:ident $(, fn $($f:ident),+)? $(; class $($c:ty),+)?) => {{
        $($($m.add_function(pyo3::wrap_pyfunction!($f, $m)?)?;)+)?
        $($($m.add_class::<$c>()?;)+)?
    }};
}

/// The `__repr__` of a frozen record class, `Name(field=value, ...)` over the fields named (Debug
/// formatting): `record_repr!(Name: a, b)`.
macro_rules! record_repr {
    ($ty:ident: $($field:ident),+) => {
        #[pyo3::pymethods]
        impl $ty {
            fn __repr__(&self) -> String {
                let fields = [$(format!(concat!(stringify!($field), "={:?}"), self.$field)),+];
                format!(concat!(stringify!($ty), "({})"), fields.join(", "))
            }
        }
    };
}

mod buffer;
mod bulk;
mod codec;
mod compaction;
mod entrylog;
mod errors;
mod gc;
mod scan;
mod txn;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    codec::register(m)?;
    bulk::register(m)?;
    entrylog::register(m)?;
    txn::register(m)?;
    compaction::register(m)?;
    gc::register(m)?;
    scan::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("FILE_DESCRIPTOR_SET", pyo3::types::PyBytes::new(m.py(), crate::codec::proto::FILE_DESCRIPTOR_SET))?;
    let info = pyo3::types::PyDict::new(m.py());
    info.set_item("version", env!("CARGO_PKG_VERSION"))?;
    info.set_item("profile", if cfg!(debug_assertions) { "debug" } else { "release" })?;
    info.set_item("crc32c_implementation", crate::codec::crc::crc32c_implementation())?;
    info.set_item("target_arch", std::env::consts::ARCH)?;
    m.add("build_info", info)?;
    Ok(())
}
