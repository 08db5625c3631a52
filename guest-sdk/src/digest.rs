//! Content digests in the form reports show them: `{sha256}` followed by hex.

use sha2::{Digest, Sha256};
use std::io::Read;

/// The digest of `bytes`, as `{sha256}3a7b…`.
///
/// ```no_run
/// let digest = wconverge_sdk::digest::sha256(b"hello\n");
/// assert!(digest.starts_with("{sha256}"));
/// ```
pub fn sha256(bytes: &[u8]) -> String {
    format_digest(Sha256::digest(bytes).as_slice())
}

/// The digest of everything `reader` yields, read in chunks.
pub fn sha256_reader(mut reader: impl Read) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    // Small and on the stack: most managed files are a few KiB, and zeroing a large
    // buffer per file showed up first in the no-op profile.
    let mut buffer = [0u8; 8 * 1024];
    loop {
        let n = reader.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(format_digest(hasher.finalize().as_slice()))
}

fn format_digest(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(8 + bytes.len() * 2);
    out.push_str("{sha256}");
    for byte in bytes {
        out.push(HEX[usize::from(byte >> 4)] as char);
        out.push(HEX[usize::from(byte & 0xf)] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn digest_of_empty_input_is_the_known_constant() {
        assert_eq!(
            super::sha256(b""),
            "{sha256}e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            super::sha256_reader(&b""[..]).expect("reading a slice cannot fail"),
            super::sha256(b"")
        );
    }
}
