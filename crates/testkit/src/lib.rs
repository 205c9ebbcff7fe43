//! What rudder's tests and fuzz targets share. Dev-only: no library of the
//! workspace depends on it, so nothing here is compiled into rudder.

pub mod fuzzing;
