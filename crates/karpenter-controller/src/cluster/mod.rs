//! The cluster as every loop reads and writes it: [`index`], the watches feeding the one shared,
//! slimmed cluster-state index ([`index::ClusterCache`]), and [`writes`], the one write path
//! (field manager, `resourceVersion` on list and status writes, answers back into the index,
//! gone objects handled once).

pub mod index;
pub mod writes;
