//! One file per family: an encoder family's tensor names and config defaults, or (GPT-2)
//! a whole causal model.

pub mod albert;
pub mod bert;
pub mod distilbert;
pub mod electra;
pub mod gpt2;
pub mod llama;
pub mod roberta;
