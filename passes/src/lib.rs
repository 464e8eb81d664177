//! infopt-passes (see ../../shared DESIGN)
