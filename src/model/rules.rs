//! What a backward pass through the model computes: the gradient, or layer-wise relevance
//! propagation's rules in the Gradient × Input form of LXT's efficient mode (Achtibat et al.,
//! "AttnLRP", ICML 2024; Ali et al., "XAI for Transformers: Better Explanations through
//! Conservative Propagation", ICML 2022). Under every rule set the forward pass computes the
//! same bits; only what flows back differs, through straight-through compositions such as
//! `x.detach() + (x − x.detach()) / 2`, whose value is x and whose derivative is ½.
//!
//! Every family's forward pass calls the functions here at the points the rules name
//! (elementwise nonlinearities, the products of attention, gates, norms' scales), so the
//! rules live in this one file. Which rules are in force is set for the forward passes one
//! thread builds, by [`Rules::apply`]; outside it, every function here is the identity.

use std::cell::Cell;

use candle_core::Tensor;

use crate::error::Result;

/// A rule set for the backward pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Rules {
    /// The gradient: no rule.
    #[default]
    Gradient,
    /// AttnLRP: the uniform rule (the gradient halved) on both products of attention (q·kᵀ,
    /// A·v) and on gates, the identity rule on elementwise nonlinearities, and every norm's
    /// scale held constant.
    AttnLrp,
    /// CP-LRP: the attention probabilities and gates held constant, the identity rule on
    /// elementwise nonlinearities, and every norm's scale held constant.
    CpLrp,
}

thread_local! {
    static IN_FORCE: Cell<Rules> = const { Cell::new(Rules::Gradient) };
}

impl Rules {
    /// Runs `f` with these rules in force for the forward passes this thread builds, and the
    /// rules before them in force again after, whatever `f` returns (or if it panics).
    pub fn apply<T>(self, f: impl FnOnce() -> T) -> T {
        struct Restore(Rules);
        impl Drop for Restore {
            fn drop(&mut self) {
                IN_FORCE.with(|rules| rules.set(self.0));
            }
        }
        let _restore = Restore(IN_FORCE.with(|rules| rules.replace(self)));
        f()
    }

    fn in_force() -> Self {
        IN_FORCE.with(Cell::get)
    }
}

/// `f(x)` for an elementwise nonlinearity f (GELU, SiLU, tanh, a soft cap); under either LRP
/// rule set, the identity rule: relevance passes through in proportion, the backward pass
/// multiplying by `f(x) / (x + ε)` instead of f′(x) (ε = 1e-10, as LXT).
pub(crate) fn nonlinear(x: &Tensor, f: impl Fn(&Tensor) -> Result<Tensor>) -> Result<Tensor> {
    let y = f(x)?;
    if Rules::in_force() == Rules::Gradient {
        return Ok(y);
    }
    let ratio = (&y / (x + 1e-10)?)?.detach();
    Ok((y.detach() + straight_through(x)?.mul(&ratio)?)?)
}

/// The product of two activations (q·kᵀ, A·v, a gate times its partner); under AttnLRP, the
/// uniform rule: each factor gets half of the relevance, the gradient halved.
pub(crate) fn product(z: Tensor) -> Result<Tensor> {
    match Rules::in_force() {
        Rules::AttnLrp => Ok((z.detach() + (straight_through(&z)? * 0.5)?)?),
        Rules::Gradient | Rules::CpLrp => Ok(z),
    }
}

/// Attention probabilities; CP-LRP holds them constant (no relevance through the softmax).
pub(crate) fn probabilities(probs: Tensor) -> Tensor {
    held_under(Rules::CpLrp, probs)
}

/// A gate's pre-activation (SwiGLU's, GeGLU's); CP-LRP holds it constant.
pub(crate) fn gate(x: Tensor) -> Tensor {
    held_under(Rules::CpLrp, x)
}

/// A norm's scale (LayerNorm's σ or 1/σ, RMSNorm's 1/rms), held constant under either LRP
/// rule set: the norm is then linear in its input (LXT's identity rule for norms).
pub(crate) fn scale(s: Tensor) -> Tensor {
    match Rules::in_force() {
        Rules::Gradient => s,
        Rules::AttnLrp | Rules::CpLrp => s.detach(),
    }
}

fn held_under(rules: Rules, x: Tensor) -> Tensor {
    match Rules::in_force() == rules {
        true => x.detach(),
        false => x,
    }
}

/// `x − x.detach()`: zero, with derivative 1.
fn straight_through(x: &Tensor) -> Result<Tensor> {
    Ok((x - x.detach())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    fn values(t: &Tensor) -> Vec<f32> {
        t.flatten_all().unwrap().to_vec1().unwrap()
    }

    /// Each rule keeps the forward value and changes the derivative as it says.
    #[test]
    fn rules_change_the_backward_pass_only() {
        let x = Var::new(&[-1.5f32, 0.5, 2.0], &Device::Cpu).unwrap();
        let gelu = |x: &Tensor| Ok(x.gelu_erf()?);
        let grad = |rules: Rules, f: &dyn Fn(&Tensor) -> Result<Tensor>| {
            let y = rules.apply(|| f(x.as_tensor())).unwrap();
            let g = y.sum_all().unwrap().backward().unwrap();
            (
                values(&y),
                g.get(x.as_tensor()).map_or(vec![0.0; 3], values),
            )
        };
        let plain = x.as_tensor().gelu_erf().unwrap();
        for rules in [Rules::Gradient, Rules::AttnLrp, Rules::CpLrp] {
            let (y, g) = grad(rules, &|x| nonlinear(x, gelu));
            assert_eq!(y, values(&plain), "{rules:?}");
            let want: Vec<f32> = match rules {
                Rules::Gradient => values(plain.backward().unwrap().get(x.as_tensor()).unwrap()),
                _ => y
                    .iter()
                    .zip(values(x.as_tensor()))
                    .map(|(y, x)| y / (x + 1e-10))
                    .collect(),
            };
            for (g, w) in g.iter().zip(&want) {
                assert!((g - w).abs() < 1e-6, "{rules:?}: {g} vs {w}");
            }
            let (y, g) = grad(rules, &|x| product((x * 3.0)?));
            assert_eq!(y, [-4.5, 1.5, 6.0]);
            let half = if rules == Rules::AttnLrp { 1.5 } else { 3.0 };
            assert_eq!(g, [half; 3], "{rules:?}");
            let (_, g) = grad(rules, &|x| Ok((probabilities(x.clone()) * 2.0)?));
            let held = if rules == Rules::CpLrp { 0.0 } else { 2.0 };
            assert_eq!(g, [held; 3], "{rules:?}");
        }
        // Outside `apply`, the gradient again.
        assert_eq!(Rules::in_force(), Rules::Gradient);
    }
}
