//! Wire formats, one module per header.
