//! One module per command that has a report; no command imports another
//! (what two share lives in a module of the crate root).

pub mod bench;
pub mod build_engine;
pub mod calibrate;
pub mod compare;
pub mod inspect;
pub mod optimize;
