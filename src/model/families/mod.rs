//! One file per encoder family: its tensor names and config defaults.

pub mod albert;
pub mod bert;
pub mod distilbert;
pub mod electra;
pub mod roberta;
