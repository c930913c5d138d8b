//! A fault rule (`--fault`, a scenario's `[[fault]] rule`) and a rule file
//! (`--faults FILE.toml`); a rule's canonical text parses back to the same rule.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(rule) = roce::inputs::fault_rule(text) {
        let again = roce::inputs::fault_rule(&rule.to_string());
        assert_eq!(again.as_ref(), Ok(&rule), "`{rule}` does not parse back to itself");
    }
    let _ = roce::inputs::fault_rule_file(text);
});
