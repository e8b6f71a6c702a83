//! `stepscope info`: exact counts on every fixture, against the reference reader.

use crate::util::*;

/// Keeps only the keys the reference reader prints, so the two can be compared whole.
fn comparable(v: &serde_json::Value) -> serde_json::Value {
    let hosts = v["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .map(|h| {
            let planes = h["planes"]
                .as_array()
                .expect("planes")
                .iter()
                .map(|p| {
                    let lines = p["lines"]
                        .as_array()
                        .expect("lines")
                        .iter()
                        .map(|l| serde_json::json!({"name": l["name"], "events": l["events"]}))
                        .collect::<Vec<_>>();
                    serde_json::json!({"name": p["name"], "events": p["events"], "lines": lines})
                })
                .collect::<Vec<_>>();
            serde_json::json!({"host": h["host"], "planes": planes})
        })
        .collect::<Vec<_>>();
    serde_json::json!({"schema": v["schema"], "events_total": v["events_total"], "hosts": hosts})
}

#[test]
fn counts_match_the_reference_reader_on_every_fixture() {
    for file in fixture_files() {
        let f = file.to_str().expect("utf-8 path");
        let ours = json(&["info", f]);
        let theirs = reference(&["info", f]);
        assert_eq!(comparable(&ours), theirs, "{f}");
        // Every capture holds events but the one taken with host tracing off (and
        // python tracing off) on CPU: it records none, only its modules. The smallest
        // others, one warm call of one program (cpu-oneoff-fixed), hold over 100.
        let events = ours["events_total"].as_u64().expect("events_total");
        assert!(events > 100 || (f.contains("cpu-host-tracer-off") && events == 0), "{f}: {events}");
    }
}

#[test]
fn tpu_fixture_has_four_devices_and_all_its_events() {
    let v = json(&["info", fixture("tpu-v6e-inference/tpu_inference_2.xplane.pb").to_str().unwrap()]);
    assert_eq!(v["events_total"], 26_723);
    let devices = v["hosts"][0]["devices"].as_array().expect("devices");
    assert_eq!(devices.len(), 4);
    assert_eq!(devices[0]["name"], "/device:TPU:0");
    assert_eq!(devices[0]["model"], "TPU v6 Lite");
    assert_eq!(devices[0]["events"], 2_317);
}

#[test]
fn xplane_and_trace_json_of_one_capture_agree() {
    // JAX writes the same events twice: into the XSpace and into the Chrome JSON
    // (the latter capped at 1M events). Small captures must agree exactly.
    let run = fixture("cpu-transformer/plugins/profile/2026_11_21_22_29_17");
    let x = json(&["info", run.join("vm.xplane.pb").to_str().unwrap()]);
    let j = json(&["info", run.join("vm.trace.json.gz").to_str().unwrap()]);
    assert_eq!(x["events_total"], j["events_total"]);
    assert_eq!(x["events_total"], 8320);
}

#[test]
fn text_output_names_planes_and_lines() {
    let out = ok(&["info", fixture("rocm-mi300x-gemm/tw003.xplane.pb").to_str().unwrap()]);
    assert!(out.contains("3,782 events"), "{out}");
    assert!(out.contains("Stream #16(Kernel)"), "{out}");
    assert!(out.contains("/device:GPU:0"), "{out}");
    assert!(out.contains("devices: 8 × GPU (AMD)"), "{out}");
    assert!(out.lines().all(|l| l.chars().count() <= 80), "wider than 80 columns:\n{out}");
}
