//! What the backend shows of its instances, checked against the model: one
//! instance ([`Sut::check_instance`], exactly under modelled timing, within
//! the windows under wall timing), a side's whole inventory, the check after
//! every step, and the first inventory after a lost answer settling that
//! call's world (H11).

use std::time::SystemTime;

use billet_provider::{Error, Instance, InstanceId, Provider, State};

use crate::factory::ProviderFactory;
use crate::model::{Doubt, ModelState, Side};

use super::report::{Report, offset};
use super::wall::{rank, wall_start_allowed, wall_state_allowed};
use super::{Sut, Time};

impl<'f, F: ProviderFactory> Sut<'f, F> {
    /// The instance the model says launch `ix` is, as of `model.now`, under
    /// modelled timing.
    fn expected(&self, model: &ModelState, ix: usize, origin: SystemTime) -> Instance {
        let launched = &model.launches[ix];
        Instance {
            id: self.ids[ix].clone(),
            name: launched.name.as_str().into(),
            owner: self.deployment(launched.side).owner.as_str().into(),
            kind: self.kind,
            state: if launched.running_at(model.now) {
                State::Running
            } else {
                State::Stopped { exit_code: 0 }
            },
            started_at: origin + launched.started,
        }
    }

    /// Checks one answer about launch `ix`, given between the wall times
    /// `from` and `to`: exactly the model's instance under modelled timing;
    /// the same identity and start time, and a state inside the windows,
    /// under wall timing.
    pub(super) fn check_instance(
        &self,
        model: &ModelState,
        ix: usize,
        got: &Instance,
        from: SystemTime,
        to: SystemTime,
    ) -> Result<(), String> {
        let windows = match self.time {
            Time::Modelled { origin, .. } => {
                let want = self.expected(model, ix, origin);
                return if *got == want {
                    Ok(())
                } else {
                    Err(format!(
                        "expected the instance {}, got {}",
                        want.report(),
                        got.report()
                    ))
                };
            }
            Time::Wall(windows) => windows,
        };
        let launched = &model.launches[ix];
        let seen = &self.seen[ix];
        let owner = &self.deployment(launched.side).owner;
        if got.id != self.ids[ix]
            || *got.name != *launched.name
            || *got.owner != **owner
            || got.kind != self.kind
            || got.started_at != seen.started_at
        {
            return Err(format!(
                "expected the instance {{ id: {}, name: {:?}, owner: {owner:?}, kind: {}, started_at: {:?} }}, got {}",
                self.ids[ix],
                launched.name,
                self.kind,
                seen.started_at,
                got.report()
            ));
        }
        let right = wall_state_allowed(got.state, from, to, seen, launched.run_time, windows);
        let when = || {
            let returned = if seen.left {
                "its launch lost its answer and the outage after it ended"
            } else {
                "launch returned"
            };
            format!(
                "answered between {} and {} after its started_at ({returned} at {}; it runs for {:?}; windows: Pending up to {:?} after {returned}, Running or Stopped {{ exit_code: 0 }} within {:?} of the end)",
                offset(from, seen.started_at),
                offset(to, seen.started_at),
                offset(seen.returned, seen.started_at),
                launched.run_time,
                windows.pending,
                windows.around_end
            )
        };
        if !right {
            return Err(format!(
                "{} is in a wrong state: {:?}, {}",
                got.id,
                got.state,
                when()
            ));
        }
        let before = seen.rank.get();
        if rank(got.state) < before {
            return Err(format!(
                "{} went back to {:?} after it was seen {}, {}",
                got.id,
                got.state,
                ["Pending", "Running", "Stopped"][usize::from(before)],
                when()
            ));
        }
        seen.rank.set(rank(got.state));
        Ok(())
    }

    /// Compares one side's inventory, answered between `from` and `to`, with
    /// the model's: the same ids, each once, each instance as
    /// [`check_instance`](Self::check_instance) wants it.
    pub(super) fn compare_inventory(
        &self,
        model: &ModelState,
        side: Side,
        got: Result<Vec<Instance>, Error>,
        from: SystemTime,
        to: SystemTime,
    ) -> Result<(), String> {
        let mut got = got.map_err(|err| {
            format!(
                "expected {side}'s whole inventory, got Err({}) ({err})",
                err.report()
            )
        })?;
        got.sort_by(|a, b| a.id.cmp(&b.id));
        let want: Vec<usize> = model.held_by(side).collect();
        let missing: Vec<&InstanceId> = want
            .iter()
            .map(|ix| &self.ids[*ix])
            .filter(|id| !got.iter().any(|i| i.id == **id))
            .collect();
        let unexpected: Vec<&Instance> = got
            .iter()
            .enumerate()
            .filter(|(n, i)| {
                !want.iter().any(|ix| self.ids[*ix] == i.id)
                    || got[..*n].iter().any(|j| j.id == i.id)
            })
            .map(|(_, i)| i)
            .collect();
        if !missing.is_empty() || !unexpected.is_empty() {
            return Err(format!(
                "{side}'s inventory holds {} instance(s), the model {}; missing: {}; unexpected or duplicated: {}",
                got.len(),
                want.len(),
                missing.report(),
                unexpected.report()
            ));
        }
        for ix in want {
            let instance = got
                .iter()
                .find(|i| i.id == self.ids[ix])
                .expect("no id is missing");
            self.check_instance(model, ix, instance, from, to)
                .map_err(|err| format!("{side}'s inventory: {err}"))?;
        }
        Ok(())
    }

    /// Checked after every step: each readable inventory equals the model's,
    /// so a refusal that recorded something, or a destroy that removed the
    /// wrong thing, is caught where it happens.
    ///
    /// The first inventory of a side read after the outage a lost answer left
    /// (H11) settles that call's world in `model`: a launch happened if the
    /// inventory shows an instance of its name the model does not know, a
    /// destroy if its instance is gone. Everything after is checked against
    /// that world: this inventory exactly, the instance a launch left as any
    /// other (its identity, its start time around the call, its state; in
    /// wall time `Pending` no longer than the declared window after the
    /// outage ended), and every later answer about it.
    pub(crate) fn check_invariants(&mut self, model: &mut ModelState) -> Result<(), String> {
        for side in [Side::Blue, Side::Green] {
            if self.provider(side).kind() != self.kind {
                return Err(format!("{side}'s kind() changed"));
            }
            if model.is_failing(side) {
                continue;
            }
            let from = SystemTime::now();
            let got = self.runtime.block_on(self.provider(side).list());
            let to = SystemTime::now();
            let settled = match (model.doubt(side), &got) {
                (Some((ix, doubt)), Ok(listed)) => Some(self.settle(model, ix, doubt, listed)?),
                _ => None,
            };
            self.compare_inventory(model, side, got, from, to)
                .map_err(|err| match settled {
                    Some(lost) => format!("{err}; {lost}"),
                    None => err,
                })?;
        }
        Ok(())
    }

    /// Settles in `model` the world of launch `ix`'s call whose answer was
    /// lost, from its side's inventory `listed`; answers what it settled, as
    /// the report tells it.
    fn settle(
        &mut self,
        model: &mut ModelState,
        ix: usize,
        doubt: Doubt,
        listed: &[Instance],
    ) -> Result<String, String> {
        let launched = &model.launches[ix];
        let side = launched.side;
        let name = launched.name.clone();
        if doubt == Doubt::Destroy {
            let id = &self.ids[ix];
            let happened = !listed.iter().any(|i| i.id == *id);
            model.settle(ix, happened);
            return Ok(format!(
                "the destroy of {id} lost its answer and the first inventory after the outage {}, so it {}",
                if happened { "lacks it" } else { "holds it" },
                if happened {
                    "happened"
                } else {
                    "did not happen"
                },
            ));
        }
        // The ids the side holds for sure (and the stand-in of this launch,
        // which no inventory shows): the instance the launch left is a new one.
        let known: Vec<&InstanceId> = model.held_by(side).map(|held| &self.ids[held]).collect();
        let left = listed
            .iter()
            .find(|i| *i.name == *name && !known.contains(&&i.id));
        let Some(left) = left else {
            model.settle(ix, false);
            return Ok(format!(
                "the launch of {name:?} lost its answer and the first inventory after the outage holds no new instance of that name, so it did not happen: an instance it left must be reported under its name"
            ));
        };
        if self.ids.contains(&left.id) {
            return Err(format!(
                "{side}'s inventory: the instance the launch of {name:?} left when it lost its answer has the id {} the backend issued before: ids are never reused on a host ({})",
                left.id,
                left.report()
            ));
        }
        self.ids[ix] = left.id.clone();
        model.settle(ix, true);
        if let Time::Wall(windows) = self.time {
            let seen = &mut self.seen[ix];
            if !wall_start_allowed(left.started_at, seen.called, seen.returned, windows) {
                return Err(format!(
                    "{side}'s inventory: the instance the launch of {name:?} left when it lost its answer started at {} from the launch call's start (the call took {}); expected within {:?} before it and {:?} after it returned ({})",
                    offset(left.started_at, seen.called),
                    offset(seen.returned, seen.called),
                    windows.around_end,
                    windows.pending,
                    left.report(),
                ));
            }
            seen.started_at = left.started_at;
            // It may be Pending for the declared window from the instant the
            // outage ended, and no longer.
            seen.returned = self.restored[side.index()].unwrap_or(seen.returned);
            seen.left = true;
        }
        Ok(format!(
            "the launch of {name:?} lost its answer and the first inventory after the outage holds it as {}, so it happened",
            left.id
        ))
    }
}
