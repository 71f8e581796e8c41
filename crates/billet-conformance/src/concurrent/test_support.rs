//! What the unit tests of the concurrent mode share: records, ids and fault
//! windows made by hand, and the outage error they answer.

use billet_provider::{ErrorKind, InstanceId};

use super::history::{Answer, Call, Dep, Record, Via, Window};
use super::specification::{Excuse, NameOp};

pub(super) fn record(
    task: usize,
    invoked: u64,
    answered: u64,
    call: Call,
    answer: Answer,
) -> Record {
    Record {
        task,
        via: Via::Blue,
        call,
        invoked,
        answered,
        answer,
        pending: Vec::new(),
        excuse: Excuse::None,
        settled: answered,
    }
}

pub(super) fn id(s: &str) -> InstanceId {
    InstanceId::from(s.to_owned())
}

pub(super) fn window(start: u64, cut: u64, restore: u64, end: u64) -> Window {
    Window {
        dep: Dep::Blue,
        lose: None,
        start,
        cut,
        restore,
        end,
    }
}

pub(super) fn sees(id: &str, pending: bool) -> NameOp {
    NameOp::Sees(Some((id.to_owned(), pending)))
}

pub(super) const LOST: ErrorKind = ErrorKind::Unavailable;
