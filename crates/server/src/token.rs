//! The secret path segment every route lives under.

/// 128 random bits from the OS, as 32 lowercase hex digits (URL-safe).
pub fn new_token() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| {
        format!("cannot get random bytes for the URL token: {e} — check that the OS random source is available")
    })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Compares without stopping at the first difference.
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_are_hex_and_differ() {
        let (a, b) = (super::new_token().unwrap(), super::new_token().unwrap());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert!(super::same(&a, &a.clone()));
        assert!(!super::same(&a, &b));
        assert!(!super::same(&a, &a[..31]));
    }
}
