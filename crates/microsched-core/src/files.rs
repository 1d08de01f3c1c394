//! Reading the files a scenario names (and scenario files themselves) with bounds: only regular
//! files (never a device, FIFO, socket or directory: `/dev/zero` would never end), and at most a
//! fixed number of bytes, so that no input file can exhaust memory or time. The error names the
//! field and the limit.

use std::io::Read;
use std::path::Path;

use crate::error::ScenarioError;

/// Largest empirical service-time CSV (`service = { dist = "empirical", csv = ... }`): 64 MiB,
/// about ten million samples.
pub const MAX_CSV_BYTES: u64 = 64 << 20;
/// Largest scenario file (TOML or JSON).
pub const MAX_SCENARIO_BYTES: u64 = 16 << 20;

/// `n` bytes in a unit a reader takes in at once (`64 MiB`, `1.5 GiB`, `300 bytes`).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (name, size) in UNITS {
        if n >= size {
            return if n % size == 0 { format!("{} {name}", n / size) } else { format!("{:.1} {name}", n as f64 / size as f64) };
        }
    }
    format!("{n} bytes")
}

fn kind(ft: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_dir() {
        "a directory"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// The text of the regular file `path`, at most `limit` bytes, UTF-8. Errors name `field`:
/// `field: cannot read `path`: ...`, `field: `path` is a character device, not a regular
/// file ...`, `field: `path` is 1 GiB: larger than the limit of 64 MiB ...`.
pub fn read_regular(path: &Path, field: &str, limit: u64) -> Result<String, ScenarioError> {
    let err = |msg: String| ScenarioError::new(field, msg);
    let shown = path.display();
    // Checked before opening: opening a FIFO for reading would block until a writer comes.
    let meta = std::fs::metadata(path).map_err(|e| err(format!("cannot read `{shown}`: {e}")))?;
    if !meta.file_type().is_file() {
        return Err(err(format!(
            "`{shown}` is {}, not a regular file: only regular files of at most {} are read",
            kind(&meta.file_type()),
            human_bytes(limit)
        )));
    }
    let too_big = |size: u64| {
        err(format!(
            "`{shown}` is {} ({size} bytes): larger than the limit of {} ({limit} bytes) for this file",
            human_bytes(size),
            human_bytes(limit)
        ))
    };
    if meta.len() > limit {
        return Err(too_big(meta.len()));
    }
    let f = std::fs::File::open(path).map_err(|e| err(format!("cannot read `{shown}`: {e}")))?;
    // The file may have changed since: read one byte past the limit to tell.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.take(limit + 1).read_to_end(&mut bytes).map_err(|e| err(format!("cannot read `{shown}`: {e}")))?;
    if bytes.len() as u64 > limit {
        return Err(too_big(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|e| err(format!("cannot read `{shown}`: not UTF-8 text (byte {})", e.utf8_error().valid_up_to())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_fifos_and_directories_are_refused_at_once() {
        for p in ["/dev/zero", "/dev/null", "/"] {
            let e = read_regular(Path::new(p), "workload.types[0].service.csv", MAX_CSV_BYTES).unwrap_err();
            assert_eq!(e.field, "workload.types[0].service.csv");
            assert!(e.message.contains("not a regular file") && e.message.contains("64 MiB"), "{e}");
        }
        let dir = std::env::temp_dir().join(format!("microsched-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc_mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_regular(&fifo, "f", 10).unwrap_err();
        assert!(e.message.contains("a FIFO"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    extern "C" {
        #[link_name = "mkfifo"]
        fn libc_mkfifo(path: *const std::os::raw::c_char, mode: u32) -> i32;
    }

    #[test]
    fn a_file_over_the_limit_is_refused_without_reading_it() {
        let dir = std::env::temp_dir().join(format!("microsched-files-big-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.csv");
        // 1 GiB, sparse: refused from its size, nothing read.
        std::fs::File::create(&big).unwrap().set_len(1 << 30).unwrap();
        let t = std::time::Instant::now();
        let e = read_regular(&big, "workload.types[0].service.csv", MAX_CSV_BYTES).unwrap_err();
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
        assert!(e.to_string().starts_with("workload.types[0].service.csv: "), "{e}");
        assert!(e.message.contains("1 GiB") && e.message.contains("limit of 64 MiB"), "{e}");
        let small = dir.join("small.csv");
        std::fs::write(&small, "1\n2\n").unwrap();
        assert_eq!(read_regular(&small, "f", 4).unwrap(), "1\n2\n");
        assert!(read_regular(&small, "f", 3).unwrap_err().message.contains("limit of 3 bytes"));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(human_bytes(64 << 20), "64 MiB");
        assert_eq!(human_bytes(1536 << 20), "1.5 GiB");
        assert_eq!(human_bytes(300), "300 bytes");
    }
}
