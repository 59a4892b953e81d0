//! Placeholder until the ML kernels land.
use super::{HandleObjs, Kernel, Params, Rand};
pub fn build(
    name: &str,
    _p: &Params,
    _h: &HandleObjs,
    _rand: Rand,
) -> Result<Box<dyn Kernel>, String> {
    Err(format!("{name}: not built yet"))
}
