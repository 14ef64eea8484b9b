//! Mirrors Go's encoding/json as it writes the Kubernetes types (`omitempty`, pointers, `[]byte` as
//! base64): the JSON form of a decoded message, what a client would have sent for the same object.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// A JSON object under construction. Each method encodes one Go JSON rule, so a message's
/// `to_json` reads like its Go struct's field list.
#[derive(Default)]
pub(super) struct Fields(pub(super) Map<String, Value>);

impl Fields {
    pub(super) fn into_json(self) -> Value {
        Value::Object(self.0)
    }

    pub(super) fn put(&mut self, key: &str, value: Value) {
        self.0.insert(key.into(), value);
    }

    /// `string` with `omitempty`: absent and `""` both stay out.
    pub(super) fn string(&mut self, key: &str, value: &Option<String>) {
        if let Some(value) = value.as_ref().filter(|v| !v.is_empty()) {
            self.put(key, Value::String(value.clone()));
        }
    }

    /// `string` without `omitempty`: always written.
    pub(super) fn required_string(&mut self, key: &str, value: &Option<String>) {
        self.put(key, Value::String(value.clone().unwrap_or_default()));
    }

    /// `*string`: written whenever present, even as `""`.
    pub(super) fn ptr_string(&mut self, key: &str, value: &Option<String>) {
        if let Some(value) = value {
            self.put(key, Value::String(value.clone()));
        }
    }

    /// `int64` with `omitempty`: zero stays out.
    pub(super) fn int(&mut self, key: &str, value: Option<i64>) {
        if let Some(value) = value.filter(|v| *v != 0) {
            self.put(key, Value::from(value));
        }
    }

    /// `*int64`: written whenever present, even as `0`.
    pub(super) fn ptr_int(&mut self, key: &str, value: Option<i64>) {
        if let Some(value) = value {
            self.put(key, Value::from(value));
        }
    }

    /// `int32`/`int64` without `omitempty`: always written, `0` when absent.
    pub(super) fn required_int(&mut self, key: &str, value: Option<i64>) {
        self.put(key, Value::from(value.unwrap_or(0)));
    }

    /// `bool` with `omitempty`: only `true` is written.
    pub(super) fn bool(&mut self, key: &str, value: Option<bool>) {
        if value == Some(true) {
            self.put(key, Value::Bool(true));
        }
    }

    /// `*bool`: written whenever present, even as `false`.
    pub(super) fn ptr_bool(&mut self, key: &str, value: Option<bool>) {
        if let Some(value) = value {
            self.put(key, Value::Bool(value));
        }
    }

    /// `[]string` with `omitempty`.
    pub(super) fn strings(&mut self, key: &str, values: &[String]) {
        if !values.is_empty() {
            self.put(key, Value::from(values.to_vec()));
        }
    }

    /// `[]string` without `omitempty` (a rule's `verbs`): always written, and `null` when empty,
    /// as Go writes the nil slice an empty repeated field decodes to.
    pub(super) fn nullable_strings(&mut self, key: &str, values: &[String]) {
        let value = if values.is_empty() { Value::Null } else { Value::from(values.to_vec()) };
        self.put(key, value);
    }

    /// `[]int64` with `omitempty`.
    pub(super) fn ints(&mut self, key: &str, values: &[i64]) {
        if !values.is_empty() {
            self.put(key, Value::from(values.to_vec()));
        }
    }

    /// `map[string]string` with `omitempty`.
    pub(super) fn string_map(&mut self, key: &str, map: &BTreeMap<String, String>) {
        if !map.is_empty() {
            let object = map
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            self.put(key, Value::Object(object));
        }
    }

    /// `map[string][]byte` with `omitempty`: Go's encoding/json writes `[]byte` as base64.
    pub(super) fn bytes_map(&mut self, key: &str, map: &BTreeMap<String, Vec<u8>>) {
        if !map.is_empty() {
            let object = map
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(base64(v))))
                .collect();
            self.put(key, Value::Object(object));
        }
    }

    /// A nested struct: written whenever present on the wire, even if empty.
    pub(super) fn message<M>(&mut self, key: &str, value: &Option<M>, to_json: fn(&M) -> Value) {
        if let Some(value) = value {
            self.put(key, to_json(value));
        }
    }

    /// `map[string]T` with `omitempty`, each value written by `to_json`.
    pub(super) fn map<M>(
        &mut self,
        key: &str,
        map: &BTreeMap<String, M>,
        to_json: fn(&M) -> Value,
    ) {
        if !map.is_empty() {
            let object = map.iter().map(|(k, v)| (k.clone(), to_json(v))).collect();
            self.put(key, Value::Object(object));
        }
    }

    /// A slice of structs with `omitempty`.
    pub(super) fn list<M>(&mut self, key: &str, values: &[M], to_json: fn(&M) -> Value) {
        if !values.is_empty() {
            self.put(key, Value::Array(values.iter().map(to_json).collect()));
        }
    }

    /// A slice of structs without `omitempty` that may well be empty (a role's `rules`): always
    /// written, and `null` when empty, as Go writes it.
    pub(super) fn nullable_list<M>(&mut self, key: &str, values: &[M], to_json: fn(&M) -> Value) {
        let value = if values.is_empty() { Value::Null } else { Value::Array(values.iter().map(to_json).collect()) };
        self.put(key, value);
    }

    /// A slice of structs without `omitempty` (a pod's `containers`): always written. Go would
    /// write an empty one as `null`; `[]` is written instead, which the typed decoder downstream
    /// accepts, so validation reports the missing containers rather than the decoder a type error.
    pub(super) fn required_list<M>(&mut self, key: &str, values: &[M], to_json: fn(&M) -> Value) {
        self.put(key, Value::Array(values.iter().map(to_json).collect()));
    }
}

/// Standard base64 with padding (RFC 4648 section 4), the encoding Go's encoding/json uses for `[]byte`.
pub(super) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        // Pack up to three bytes into 24 bits and emit one character per 6 bits present.
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 0x3f) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        let cases: [(&[u8], &str); 7] = [
            (b"", ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg=="),
            (b"fooba", "Zm9vYmE="),
            (b"foobar", "Zm9vYmFy"),
        ];
        for (input, want) in cases {
            assert_eq!(base64(input), want);
        }
        assert_eq!(base64(&[0xff, 0xfe, 0xfd]), "//79");
    }
}
