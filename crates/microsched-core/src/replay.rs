//! A recorded run's requests, offered again (`workload.replay`): the simulator's arrivals,
//! sessions, types and service times come from the file instead of the scenario's streams, so a
//! real run (`microsched real --record`) can be compared with the simulator request by request.
//!
//! The file is CSV with a header naming at least `created_ns`, `session`, `type` and
//! `service_ns` (other columns are ignored), one row per request in creation order: creation
//! times count from the start of the schedule (the warm-up included), as the load generator's
//! do. It is read with the same bounds as the empirical service CSVs (a regular file, at most
//! [`crate::files::MAX_CSV_BYTES`]).

use std::collections::VecDeque;
use std::path::Path;

use crate::files::{read_regular, MAX_CSV_BYTES};
use crate::{Nanos, ScenarioError};

/// One recorded request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub created_ns: Nanos,
    pub session: u32,
    pub rtype: u16,
    pub service_ns: Nanos,
}

/// The rows of a replay file, in creation order.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    pub rows: VecDeque<Row>,
}

const COLUMNS: [&str; 4] = ["created_ns", "session", "type", "service_ns"];

impl Replay {
    /// Reads `file` (relative to `base_dir`) for a workload of `types` request types; errors
    /// name `field`, the row and the column.
    pub fn load(file: &str, base_dir: &Path, field: &str, types: usize) -> Result<Replay, ScenarioError> {
        let path = base_dir.join(file);
        let text = read_regular(&path, field, MAX_CSV_BYTES)?;
        let err = |msg: String| ScenarioError::new(field, msg);
        let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
        let (_, header) = lines.next().ok_or_else(|| err(format!("`{file}` is empty: it needs a header ({}) and one row per request", COLUMNS.join(","))))?;
        let names: Vec<&str> = header.split(',').map(|h| h.trim()).collect();
        let mut at = [0usize; 4];
        for (k, c) in COLUMNS.iter().enumerate() {
            at[k] = names
                .iter()
                .position(|n| n == c)
                .ok_or_else(|| err(format!("`{file}` has no column `{c}`: its header must name {}", COLUMNS.join(", "))))?;
        }
        let mut rows = VecDeque::new();
        let mut last = 0;
        for (i, line) in lines {
            let cells: Vec<&str> = line.split(',').map(|c| c.trim()).collect();
            let cell = |k: usize| -> Result<u64, ScenarioError> {
                let v = cells.get(at[k]).copied().unwrap_or("");
                v.parse::<u64>().or_else(|_| v.parse::<f64>().ok().filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0).map(|f| f as u64).ok_or(())).map_err(|_| {
                    err(format!("`{file}` line {}: {} = `{v}` is not a non-negative integer", i + 1, COLUMNS[k]))
                })
            };
            let row = Row { created_ns: cell(0)?, session: cell(1)? as u32, rtype: cell(2)? as u16, service_ns: cell(3)? };
            if row.rtype as usize >= types {
                return Err(err(format!("`{file}` line {}: type = {} but the workload has {types} request types: use 0..{types}", i + 1, row.rtype)));
            }
            if row.created_ns < last {
                return Err(err(format!("`{file}` line {}: created_ns = {} is before the previous row's {last}: rows must be in creation order", i + 1, row.created_ns)));
            }
            last = row.created_ns;
            rows.push_back(row);
        }
        if rows.is_empty() {
            return Err(err(format!("`{file}` has no rows: a replay needs at least one request")));
        }
        Ok(Replay { rows })
    }

    /// Checks the sessions against the clients the scenario has.
    pub fn check_sessions(&self, sessions: u32, field: &str) -> Result<(), ScenarioError> {
        match self.rows.iter().position(|r| r.session >= sessions) {
            Some(i) => Err(ScenarioError::new(
                field,
                format!("row {}: session = {} but clients.sessions = {sessions}: use a scenario with at least {} sessions", i + 1, self.rows[i].session, self.rows[i].session + 1),
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory holding `r.csv`, removed when the returned guard drops.
    fn write(text: &str) -> tempfile::TempDir {
        let dir = tempfile::Builder::new().prefix("microsched-replay-").tempdir().unwrap();
        std::fs::write(dir.path().join("r.csv"), text).unwrap();
        dir
    }

    #[test]
    fn rows_are_read_by_column_name_and_checked() {
        let dir = write("id,session,type,created_ns,service_ns,latency_ns\n0,3,1,100,5000,9\n1,0,0,250,2000,7\n");
        let r = Replay::load("r.csv", dir.path(), "workload.replay", 2).unwrap();
        assert_eq!(r.rows.len(), 2);
        assert_eq!(r.rows[0], Row { created_ns: 100, session: 3, rtype: 1, service_ns: 5000 });
        assert!(r.check_sessions(4, "workload.replay").is_ok());
        assert!(r.check_sessions(3, "workload.replay").unwrap_err().message.contains("clients.sessions = 3"));
        let e = Replay::load("r.csv", dir.path(), "workload.replay", 1).unwrap_err();
        assert!(e.message.contains("type = 1") && e.message.contains("1 request types"), "{e}");
        for (name, text, needle) in [
            ("order", "created_ns,session,type,service_ns\n5,0,0,1\n4,0,0,1\n", "creation order"),
            ("col", "created_ns,session,service_ns\n5,0,1\n", "no column `type`"),
            ("bad", "created_ns,session,type,service_ns\n5,0,0,-1\n", "service_ns = `-1`"),
            ("empty", "created_ns,session,type,service_ns\n", "no rows"),
        ] {
            let dir = write(text);
            let e = Replay::load("r.csv", dir.path(), "workload.replay", 1).unwrap_err();
            assert_eq!(e.field, "workload.replay");
            assert!(e.message.contains(needle), "{name}: {e}");
        }
    }
}
