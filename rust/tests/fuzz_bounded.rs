//! Bounded mutation fuzzer on stable Rust: every target of `pulsarkit::fuzz` runs for
//! `PULSARKIT_FUZZ_SECONDS` seconds (default 2 under plain `cargo test`; `scripts/fuzz.sh` runs 20),
//! starting from valid seeds and mutating them (bit flips, byte sets, truncations, extensions,
//! boundary length overwrites, varints, splices). It fails on any panic, reporting the target and
//! the input (hex, and saved under the cargo target tmpdir), and on any single allocation above
//! 64 MiB (inputs are capped at 1 MiB, so that would be a decompression or length bomb).
//!
//! Environment: `PULSARKIT_FUZZ_SECONDS` (per target, fractional allowed), `PULSARKIT_FUZZ_SEED`
//! (default: from the clock, printed), `PULSARKIT_FUZZ_TARGETS` (comma-separated names),
//! `PULSARKIT_FUZZ_REPLAY=<target>:<file>` (run one saved input and report),
//! `PULSARKIT_FUZZ_WRITE_CORPUS=<dir>` (write the seeds as `<dir>/<target>/seed-N` for cargo-fuzz).
use pulsarkit::fuzz::{mutate, targets, Rng, Target};
use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const MAX_INPUT: usize = 1 << 20;
const MAX_SINGLE_ALLOCATION: usize = 64 << 20;
/// An input that runs longer than this is reported as a hang.
const HANG: Duration = Duration::from_secs(20);

/// Counts the largest single allocation since the last reset.
struct Counting;
static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        System.alloc_zeroed(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LARGEST.fetch_max(new, Ordering::Relaxed);
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn hex(b: &[u8], max: usize) -> String {
    let mut s: String = b.iter().take(max).map(|x| format!("{x:02x}")).collect();
    if b.len() > max {
        s.push_str(&format!("... ({} bytes)", b.len()));
    }
    s
}

struct Stats {
    name: &'static str,
    execs: u64,
    accepted: u64,
    corpus: usize,
    secs: f64,
}

/// The input being run, for the hang watchdog.
struct Current {
    target: Mutex<&'static str>,
    input: Mutex<Vec<u8>>,
    started_ms: AtomicU64,
    running: AtomicBool,
}

fn now_ms(origin: Instant) -> u64 {
    origin.elapsed().as_millis() as u64
}

fn save(target: &str, input: &[u8]) -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{target}-{:08x}.bin", pulsarkit::codec::crc::crc32c(input)));
    let _ = std::fs::write(&path, input);
    path.display().to_string()
}

/// Runs one input; `Err` describes a panic or an oversized allocation.
fn run_one(t: &Target, input: &[u8], last_panic: &Arc<Mutex<String>>) -> Result<bool, String> {
    LARGEST.store(0, Ordering::Relaxed);
    let r = panic::catch_unwind(AssertUnwindSafe(|| (t.run)(input)));
    let largest = LARGEST.load(Ordering::Relaxed);
    match r {
        Err(_) => {
            let mut msg = last_panic.lock().unwrap().clone();
            if msg.len() > 1500 {
                let cut = (0..=1500).rev().find(|&i| msg.is_char_boundary(i)).unwrap_or(0);
                msg = format!("{} ... ({} chars)", &msg[..cut], msg.len());
            }
            Err(format!("panic: {msg}"))
        }
        Ok(_) if largest > MAX_SINGLE_ALLOCATION => {
            Err(format!("a single allocation of {largest} bytes for an input of {} bytes", input.len()))
        }
        Ok(accepted) => Ok(accepted),
    }
}

fn fuzz_target(
    t: &Target,
    secs: f64,
    seed: u64,
    cur: &Current,
    origin: Instant,
    last_panic: &Arc<Mutex<String>>,
) -> (Stats, Option<String>) {
    let mut corpus = (t.seeds)();
    let mut rng = Rng::new(seed);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(secs);
    let (mut execs, mut accepted) = (0u64, 0u64);
    *cur.target.lock().unwrap() = t.name;
    let seeds = corpus.clone();
    let mut failure = None;
    // Seeds first (they must all pass), then mutants until the deadline.
    let mut seed_iter = seeds.iter();
    loop {
        let input = match seed_iter.next() {
            Some(s) => s.clone(),
            None => {
                if Instant::now() >= deadline {
                    break;
                }
                let parent = &corpus[rng.below(corpus.len())];
                mutate(&mut rng, parent, &corpus, MAX_INPUT)
            }
        };
        {
            let mut slot = cur.input.lock().unwrap();
            slot.clear();
            slot.extend_from_slice(&input);
        }
        cur.started_ms.store(now_ms(origin), Ordering::Relaxed);
        execs += 1;
        match run_one(t, &input, last_panic) {
            Ok(true) => {
                accepted += 1;
                // Without coverage feedback, inputs that still parse are the ones worth mutating further.
                if corpus.len() < 2048 && rng.chance(4) {
                    corpus.push(input);
                }
            }
            Ok(false) => {}
            Err(why) => {
                let path = save(t.name, &input);
                failure = Some(format!(
                    "target {}: {why}\n  input ({} bytes, saved to {path}): {}",
                    t.name,
                    input.len(),
                    hex(&input, 512)
                ));
                break;
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    (Stats { name: t.name, execs, accepted, corpus: corpus.len(), secs }, failure)
}

fn env_secs() -> f64 {
    std::env::var("PULSARKIT_FUZZ_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(2.0)
}

#[test]
fn bounded_mutation_fuzz() {
    let all = targets();
    if let Ok(dir) = std::env::var("PULSARKIT_FUZZ_WRITE_CORPUS") {
        for t in &all {
            let d = std::path::Path::new(&dir).join(t.name);
            std::fs::create_dir_all(&d).unwrap();
            for (i, s) in (t.seeds)().iter().enumerate() {
                std::fs::write(d.join(format!("seed-{i}")), s).unwrap();
            }
        }
        eprintln!("wrote seed corpora to {dir}");
    }
    // Read a replay input before the quiet panic hook goes in, so path errors print normally.
    let replay = std::env::var("PULSARKIT_FUZZ_REPLAY").ok().map(|spec| {
        let (name, file) = spec.split_once(':').expect("PULSARKIT_FUZZ_REPLAY=<target>:<file>");
        let t = *all.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("unknown target {name}"));
        (t, std::fs::read(file).unwrap_or_else(|e| panic!("{file}: {e} (relative paths start at rust/)")))
    });
    let last_panic = Arc::new(Mutex::new(String::new()));
    {
        let lp = last_panic.clone();
        panic::set_hook(Box::new(move |info| {
            let loc = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
            let msg = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_default();
            *lp.lock().unwrap() = format!("{msg}{loc}");
        }));
    }

    if let Some((t, input)) = replay {
        let name = t.name;
        let r = run_one(&t, &input, &last_panic);
        let _ = panic::take_hook();
        match r {
            Ok(acc) => eprintln!("{name}: ok (accepted: {acc})"),
            Err(why) => {
                eprintln!("{name}: {why}");
                panic!("{name}: replayed input fails");
            }
        }
        return;
    }

    let secs = env_secs();
    let seed = std::env::var("PULSARKIT_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64);
    let only: Option<Vec<String>> =
        std::env::var("PULSARKIT_FUZZ_TARGETS").ok().map(|s| s.split(',').map(|x| x.trim().to_string()).collect());
    let selected: Vec<&Target> =
        all.iter().filter(|t| only.as_ref().map_or(true, |o| o.iter().any(|n| n == t.name))).collect();
    assert!(!selected.is_empty(), "PULSARKIT_FUZZ_TARGETS matched no target");
    eprintln!(
        "pulsarkit fuzz: {} targets x {secs} s, seed {seed} (PULSARKIT_FUZZ_SEED to repeat the mutation order)",
        selected.len()
    );

    // Hang watchdog: an input running longer than HANG is printed and the process aborts.
    let origin = Instant::now();
    let cur = Arc::new(Current {
        target: Mutex::new(""),
        input: Mutex::new(Vec::new()),
        started_ms: AtomicU64::new(0),
        running: AtomicBool::new(true),
    });
    let wd = {
        let cur = cur.clone();
        std::thread::spawn(move || {
            while cur.running.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(500));
                let started = cur.started_ms.load(Ordering::Relaxed);
                if cur.running.load(Ordering::Relaxed)
                    && now_ms(origin).saturating_sub(started) > HANG.as_millis() as u64
                {
                    // The worker may hold the lock while copying; try a few times, then report without it.
                    let name = *cur.target.lock().unwrap();
                    let input = cur.input.try_lock().map(|i| i.clone()).unwrap_or_default();
                    let path = save(name, &input);
                    eprintln!(
                        "HANG in target {name}: one input ran over {HANG:?}; saved to {path}: {}",
                        hex(&input, 512)
                    );
                    std::process::abort();
                }
            }
        })
    };

    let mut failures = Vec::new();
    let mut stats = Vec::new();
    for (i, t) in selected.iter().enumerate() {
        let (s, f) = fuzz_target(t, secs, seed.wrapping_add(i as u64 * 0x1000_0001), &cur, origin, &last_panic);
        stats.push(s);
        failures.extend(f);
    }
    cur.running.store(false, Ordering::Relaxed);
    let _ = wd.join();
    let _ = panic::take_hook();

    eprintln!("{:<18} {:>10} {:>10} {:>9} {:>7} {:>7}", "target", "execs", "execs/s", "accepted", "corpus", "secs");
    let mut total = 0;
    for s in &stats {
        total += s.execs;
        eprintln!(
            "{:<18} {:>10} {:>10.0} {:>9} {:>7} {:>7.1}",
            s.name,
            s.execs,
            s.execs as f64 / s.secs.max(1e-9),
            s.accepted,
            s.corpus,
            s.secs
        );
    }
    eprintln!("total executions: {total}");
    assert!(failures.is_empty(), "fuzzing found {} failure(s):\n{}", failures.len(), failures.join("\n"));
}
