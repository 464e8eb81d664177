//! infopt-calibration (see ../../shared DESIGN)
