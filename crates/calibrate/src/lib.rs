pub mod mdc;
