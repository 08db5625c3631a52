//! Positions in the evaluator's collections. Each collection has a type of position of
//! its own, so that a scope's position cannot pick a resource, nor a class's a defined
//! type; indexing a collection with its own kind of position reads as indexing with a
//! number did.

use super::{CollectorState, Res, Scope};
use crate::syntax::{ClassDef, DefineDef, Program};
use std::ops::{Index, IndexMut};

/// A position in `Evaluator::scopes`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) struct ScopeId(usize);

impl ScopeId {
    /// The scope at `position` in `Evaluator::scopes`.
    pub(super) const fn new(position: usize) -> Self {
        ScopeId(position)
    }
}

impl Index<ScopeId> for Vec<Scope> {
    type Output = Scope;

    fn index(&self, id: ScopeId) -> &Scope {
        &self[id.0]
    }
}

impl IndexMut<ScopeId> for Vec<Scope> {
    fn index_mut(&mut self, id: ScopeId) -> &mut Scope {
        &mut self[id.0]
    }
}

/// A position in `Evaluator::resources`: a resource, class or defined type instance.
///
/// Ordered as the positions are: the order in which the resources were made.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub(super) struct ResourceId(usize);

impl ResourceId {
    /// The resource at `position` in `Evaluator::resources`.
    pub(super) fn new(position: usize) -> Self {
        ResourceId(position)
    }

    /// Every position below `end`, in order: with `Evaluator::resources.len()`, every
    /// resource.
    pub(super) fn below(end: usize) -> impl Iterator<Item = ResourceId> {
        (0..end).map(ResourceId)
    }
}

impl Index<ResourceId> for Vec<Res> {
    type Output = Res;

    fn index(&self, id: ResourceId) -> &Res {
        &self[id.0]
    }
}

impl IndexMut<ResourceId> for Vec<Res> {
    fn index_mut(&mut self, id: ResourceId) -> &mut Res {
        &mut self[id.0]
    }
}

/// A position in `Evaluator::collectors`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) struct CollectorId(usize);

impl CollectorId {
    /// The collector at `position` in `Evaluator::collectors`.
    pub(super) fn new(position: usize) -> Self {
        CollectorId(position)
    }

    /// Every position below `end`, in order: with `Evaluator::collectors.len()`, every
    /// collector.
    pub(super) fn below(end: usize) -> impl Iterator<Item = CollectorId> {
        (0..end).map(CollectorId)
    }
}

impl Index<CollectorId> for Vec<CollectorState> {
    type Output = CollectorState;

    fn index(&self, id: CollectorId) -> &CollectorState {
        &self[id.0]
    }
}

impl IndexMut<CollectorId> for Vec<CollectorState> {
    fn index_mut(&mut self, id: CollectorId) -> &mut CollectorState {
        &mut self[id.0]
    }
}

/// A position in `Program::classes`: a class definition.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) struct ClassId(usize);

/// A position in `Program::defines`: a defined type's definition.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) struct DefineId(usize);

/// A position in `Program::functions`: the definition of a function written in the
/// language.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) struct FunctionId(usize);

impl ClassId {
    /// The class definition at `position` in `Program::classes`.
    pub(super) fn new(position: usize) -> Self {
        ClassId(position)
    }
}

impl DefineId {
    /// The defined type's definition at `position` in `Program::defines`.
    pub(super) fn new(position: usize) -> Self {
        DefineId(position)
    }
}

impl FunctionId {
    /// The function definition at `position` in `Program::functions`.
    pub(super) fn new(position: usize) -> Self {
        FunctionId(position)
    }
}

/// The definitions a program holds, by their positions. The defined types and the
/// functions are held alike (`DefineDef`): each has its own kind of position, so that
/// one is not read for the other.
impl Program {
    /// The class definition `id` is the position of.
    pub(super) fn class(&self, id: ClassId) -> &ClassDef {
        &self.classes[id.0]
    }

    /// The defined type's definition `id` is the position of.
    pub(super) fn define(&self, id: DefineId) -> &DefineDef {
        &self.defines[id.0]
    }

    /// The function definition `id` is the position of.
    pub(super) fn function(&self, id: FunctionId) -> &DefineDef {
        &self.functions[id.0]
    }
}
