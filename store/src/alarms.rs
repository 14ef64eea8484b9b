//! Mirrors etcd's `etcdserver/api/v3alarm/alarms.go`: the alarms raised on the cluster, one per
//! member and alarm type, kept in the state machine (and the engine) so that every member agrees
//! on them and they survive restarts.
//!
//! An alarm changes only through a raft entry (an `AlarmRequest` applied by [`crate::apply`]), so
//! a NOSPACE alarm raised by the member that ran out of space caps writes on every member.

use std::collections::BTreeMap;

use prost::Message as _;
use proto::etcd::PbAlarmMember;

use crate::engine::{Engine, WriteBatch, keys};
use crate::error::{Error, Result};

/// `etcdserverpb.AlarmType`.
pub mod alarm_type {
    pub const NONE: i32 = 0;
    pub const NOSPACE: i32 = 1;
    pub const CORRUPT: i32 = 2;

    /// The name etcd prints for an alarm type.
    pub fn name(t: i32) -> &'static str {
        match t {
            NOSPACE => "NOSPACE",
            CORRUPT => "CORRUPT",
            _ => "NONE",
        }
    }
}

/// `etcdserverpb.AlarmRequest.AlarmAction`.
pub mod alarm_action {
    pub const GET: i32 = 0;
    pub const ACTIVATE: i32 = 1;
    pub const DEACTIVATE: i32 = 2;
}

/// An alarm as etcd's generated `String()` prints it (what `etcdctl alarm list` shows, and
/// what Status lists among its errors).
pub fn describe(m: &PbAlarmMember) -> String {
    format!("memberID:{} alarm:{} ", m.member_id, alarm_type::name(m.alarm))
}

fn engine_key(member: u64, alarm: i32) -> Vec<u8> {
    let mut k = keys::with_u64(keys::ALARM, member);
    k.extend_from_slice(&alarm.to_be_bytes());
    k
}

#[derive(Default, Debug, Clone, PartialEq)]
pub struct AlarmStore {
    /// (alarm type, member) → the alarm; ordered as etcd lists them (by type, then member).
    raised: BTreeMap<(i32, u64), PbAlarmMember>,
}

impl AlarmStore {
    /// The alarms recorded in the engine.
    pub fn load(engine: &dyn Engine) -> Result<Self> {
        let mut s = Self::default();
        for item in engine.scan_prefix(keys::ALARM) {
            let (_, v) = item?;
            let m = PbAlarmMember::decode(v.as_slice()).map_err(|e| Error::Corrupt { what: "alarm", detail: e.to_string() })?;
            s.raised.insert((m.alarm, m.member_id), m);
        }
        Ok(s)
    }

    /// Raises `alarm` for `member`; returns it, or None if it was already raised.
    pub fn activate(&mut self, member: u64, alarm: i32, batch: &mut WriteBatch) -> Option<PbAlarmMember> {
        if self.raised.contains_key(&(alarm, member)) {
            return None;
        }
        let m = PbAlarmMember { member_id: member, alarm };
        batch.put(engine_key(member, alarm), m.encode_to_vec());
        self.raised.insert((alarm, member), m);
        Some(m)
    }

    /// Clears `alarm` for `member`; returns it, or None if it was not raised.
    pub fn deactivate(&mut self, member: u64, alarm: i32, batch: &mut WriteBatch) -> Option<PbAlarmMember> {
        let m = self.raised.remove(&(alarm, member))?;
        batch.delete(engine_key(member, alarm));
        Some(m)
    }

    /// The alarms of type `alarm`, or every alarm for [`alarm_type::NONE`].
    pub fn get(&self, alarm: i32) -> Vec<PbAlarmMember> {
        self.raised.values().filter(|m| alarm == alarm_type::NONE || m.alarm == alarm).copied().collect()
    }

    /// Whether a NOSPACE alarm caps writes (etcd's capped applier).
    pub fn no_space(&self) -> bool {
        self.raised.keys().any(|(t, _)| *t == alarm_type::NOSPACE)
    }

    /// Replaces every alarm (a snapshot from the leader), staging the engine writes.
    pub fn restore(&mut self, alarms: Vec<PbAlarmMember>, engine: &dyn Engine, batch: &mut WriteBatch) -> Result<()> {
        for item in engine.scan_prefix(keys::ALARM) {
            batch.delete(item?.0);
        }
        self.raised.clear();
        for m in alarms {
            self.activate(m.member_id, m.alarm, batch);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::SledEngine;

    #[test]
    fn alarms_are_kept_per_member_and_type_and_survive_a_reload() {
        let engine = SledEngine::temporary().unwrap();
        let mut a = AlarmStore::default();
        let mut b = WriteBatch::default();
        assert!(a.activate(7, alarm_type::NOSPACE, &mut b).is_some());
        assert!(a.activate(7, alarm_type::NOSPACE, &mut b).is_none(), "raised once");
        a.activate(3, alarm_type::NOSPACE, &mut b);
        a.activate(3, alarm_type::CORRUPT, &mut b);
        assert!(a.no_space());
        assert_eq!(a.get(alarm_type::NOSPACE).iter().map(|m| m.member_id).collect::<Vec<_>>(), vec![3, 7]);
        assert_eq!(a.get(alarm_type::NONE).len(), 3);
        engine.write(b).unwrap();
        assert_eq!(AlarmStore::load(&engine).unwrap(), a);

        let mut b = WriteBatch::default();
        a.deactivate(3, alarm_type::NOSPACE, &mut b).unwrap();
        assert!(a.no_space(), "member 7's NOSPACE still caps writes");
        a.deactivate(7, alarm_type::NOSPACE, &mut b).unwrap();
        assert!(a.deactivate(7, alarm_type::NOSPACE, &mut b).is_none());
        assert!(!a.no_space());
        engine.write(b).unwrap();
        assert_eq!(AlarmStore::load(&engine).unwrap().get(alarm_type::NONE), vec![PbAlarmMember { member_id: 3, alarm: alarm_type::CORRUPT }]);
        assert_eq!(describe(&PbAlarmMember { member_id: 3, alarm: alarm_type::NOSPACE }), "memberID:3 alarm:NOSPACE ");
    }
}
