//! The machine a run measures on, in words, for result headers and plot titles: core count and
//! CPU model (from `/proc/cpuinfo` where there is one), and the load average at a moment.
//!
//! Missing files never fail a run: a machine we cannot describe is described as such.

/// Cores available to this process and the CPU model, e.g. `2 cores, AMD EPYC`.
pub fn describe() -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|text| cpu_model(&text));
    match model {
        Some(m) => format!("{cores} cores, {m}"),
        None => format!("{cores} cores, CPU model unknown"),
    }
}

/// The first `model name` of a `/proc/cpuinfo` text.
fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        let value = value.split_whitespace().collect::<Vec<_>>().join(" ");
        (key.trim() == "model name" && !value.is_empty()).then_some(value)
    })
}

/// The 1-, 5- and 15-minute load averages as `/proc/loadavg` gives them, e.g. `0.12 0.30 0.41`.
pub fn load_average() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let fields: Vec<&str> = text.split_whitespace().take(3).collect();
    (fields.len() == 3).then(|| fields.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_first_model_name() {
        let text = "processor\t: 0\nmodel name\t: Intel(R)  Xeon(R) Gold\nflags\t: x\nmodel name\t: other\n";
        assert_eq!(cpu_model(text).as_deref(), Some("Intel(R) Xeon(R) Gold"));
        assert_eq!(cpu_model("processor\t: 0\n"), None);
    }

    #[test]
    fn describes_this_machine() {
        assert!(describe().contains("cores"));
    }
}
