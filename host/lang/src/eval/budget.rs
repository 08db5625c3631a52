//! The evaluator's budget: the work an evaluation may do and the size of the values it
//! builds, each an error at the place past its limit.

use super::*;
use crate::diagnostic::DiagnosticCode;

impl Evaluator<'_> {
    /// Counts `cost` of the compile's work; once [`MAX_COMPILE_WORK`] is done, reports it
    /// (once) and answers false.
    pub(crate) fn work(&mut self, cost: u64, span: Span) -> bool {
        if self.work > MAX_COMPILE_WORK {
            return false;
        }
        self.work = self.work.saturating_add(cost);
        if self.work > MAX_COMPILE_WORK {
            self.error(
                DiagnosticCode::WorkLimit,
                span,
                format!(
                    "the manifests did more work than a compile may ({MAX_COMPILE_WORK} steps: \
                     expressions evaluated, lambdas called, regular expressions compiled, and \
                     the values built, copied and compared); the compile stopped here"
                ),
            )
            .help =
                Some("look for a loop that runs without end or builds ever larger values".into());
            return false;
        }
        true
    }

    /// Counts `cost` of the compile's work (nothing in a lazy value, which has a budget
    /// of its own); false once the compile has done all it may.
    pub(crate) fn count_work(&mut self, cost: u64, span: Span) -> bool {
        self.budget.is_some() || self.work(cost, span)
    }

    /// `value`, if it is within the size limits; else `undef`, with an error.
    pub(super) fn bounded(&mut self, value: Val, span: Span) -> Val {
        match &value {
            Val::Str(text) if text.len() > MAX_STRING_BYTES => {
                self.value_limit(
                    span,
                    format!(
                        "this builds a string of {} bytes; a string may have at most \
                         {MAX_STRING_BYTES} (16 MiB)",
                        text.len()
                    ),
                );
                Val::Undef
            }
            Val::Array(_) | Val::Hash(_) => {
                let size = lazy::size_capped(&value, MAX_VALUE_SIZE + 1);
                if self.budget.is_none() && !self.work(size, span) {
                    return Val::Undef;
                }
                if size > MAX_VALUE_SIZE {
                    self.value_limit(
                        span,
                        format!(
                            "this builds a value of more than {MAX_VALUE_SIZE} elements (a \
                             string counting one per eight bytes), the limit"
                        ),
                    );
                    return Val::Undef;
                }
                value
            }
            _ => value,
        }
    }

    pub(crate) fn value_limit(&mut self, span: Span, message: String) {
        self.error(DiagnosticCode::ValueLimit, span, message).help = Some(
            "look for a value that grows in a loop, or that contains itself more than once".into(),
        );
    }

    /// Counts what a copy of `value` costs (reading a variable or a node attribute copies
    /// it): against a lazy value's budget, or the compile's work, where each element
    /// counts [`COPY_WORK`]. False once there is no budget left.
    pub(crate) fn charge_copy(&mut self, value: &Val, span: Span) -> bool {
        match self.budget {
            Some(budget) => {
                let cost = lazy::size_capped(value, budget);
                self.spend(cost, span)
            }
            None => {
                let cap = MAX_COMPILE_WORK.saturating_sub(self.work) / COPY_WORK + 1;
                let cost = lazy::size_capped(value, cap);
                self.work(cost.saturating_mul(COPY_WORK), span)
            }
        }
    }

    /// Adds `value` to the `total` size of a value being built; false (with an error)
    /// once that passes [`MAX_VALUE_SIZE`]. A collection is measured as it grows, so a
    /// copy too many is refused before it is made, not after.
    pub(crate) fn grow(&mut self, total: &mut u64, value: &Val, span: Span) -> bool {
        *total += lazy::size_capped(value, MAX_VALUE_SIZE + 1);
        if *total > MAX_VALUE_SIZE {
            self.value_limit(
                span,
                format!(
                    "this builds a value of more than {MAX_VALUE_SIZE} elements (a string \
                     counting one per eight bytes), the limit"
                ),
            );
            return false;
        }
        true
    }

    /// Spends `cost` of a lazy evaluation's budget; once it is spent, reports it (once)
    /// and every further expression is `undef`.
    pub(super) fn spend(&mut self, cost: u64, span: Span) -> bool {
        let Some(budget) = self.budget else {
            return true;
        };
        if budget == 0 {
            return false;
        }
        if cost >= budget {
            self.budget = Some(0);
            self.error(
                DiagnosticCode::LazyBudget,
                span,
                format!(
                    "it did more work than a lazy value may ({} steps and values read)",
                    lazy::LAZY_BUDGET
                ),
            )
            .help = Some("simplify the expression, or compute the value at compile time".into());
            return false;
        }
        self.budget = Some(budget - cost);
        true
    }
}
