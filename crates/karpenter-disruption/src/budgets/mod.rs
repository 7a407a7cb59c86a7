//! Disruption budgets, from one budget to the allowances a pass spends:
//!
//! - `budget.rs`: one budget: whether it is active at `now`, how many nodes it allows, and a
//!   NodePool's allowance for a reason (the minimum of its budgets, minus the nodes already
//!   disrupting);
//! - `window.rs`: until when an active scheduled budget stays active;
//! - `map.rs`: [`BudgetMap`], the per-NodePool allowances for one reason, decremented as a
//!   method takes candidates.

pub(crate) mod budget;
pub(crate) mod map;
pub(crate) mod window;

pub use map::{BudgetMap, PoolAllowance};
