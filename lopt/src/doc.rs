//! One parse of a `tokenizer.json` for lopt's load: the model's vocabulary and merges read
//! straight from the file's bytes into tables that borrow its strings, everything else as a
//! `serde_json::Value`.
//!
//! Why: a 128K-200K-entry vocabulary and its merges parsed into a `Value` cost a `String` and a
//! map slot per entry, then the map again in every reader and a thread to free it all (callgrind,
//! deepseek_v3's seeded load: the parse 286 M of 1,079 M instructions, freeing it 145 M). Here a
//! token is a `&str` into the file (an owned string only where the JSON spells it with an
//! escape) and the vocabulary is one hash map that every reader shares.
//!
//! Invariants:
//! * [`Doc::parse`] and [`Doc::from_value`] (the same file parsed into a `Value` first) give
//!   equal documents: the same rest, the same vocabulary, the same merges (checked on every
//!   fixture and on hostile shapes by the tests here);
//! * `model.vocab` is taken out of the rest only when it is an object whose every value is an
//!   integer that fits a `u32` (HF's own type for every model with a token → id map); a repeated
//!   key keeps its last id, as a `Value` map and HF's map do. Any other vocabulary (Unigram's list,
//!   a hostile object) stays in the rest as written;
//! * `model.merges` is taken out only when it is a list; each entry is kept as HF reads it (a
//!   `"a b"` line, an `["a", "b"]` pair) or marked bad ([`Merge::sides`] then refuses it);
//! * a repeated `model` key, or `vocab` / `merges` inside it, keeps the last one, as a `Value`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::{Error, ErrorKind, Result};

/// A vocabulary's token → id map, tokens borrowed from the file where it spells them plainly.
pub(crate) type TokenIds<'a> = HashMap<Cow<'a, str>, u32, ahash::RandomState>;

/// A parsed `tokenizer.json`.
#[derive(Debug, PartialEq)]
pub(crate) struct Doc<'a> {
    /// The file without `model.vocab` and `model.merges` where those were taken out.
    pub(crate) json: Value,
    /// `model.vocab`, when it is an object of `u32` ids.
    pub(crate) vocab: Option<TokenIds<'a>>,
    /// `model.merges`, when it is a list.
    pub(crate) merges: Option<Vec<Merge<'a>>>,
}

/// One entry of `model.merges`.
#[derive(Debug, PartialEq)]
pub(crate) enum Merge<'a> {
    /// `"a b"`.
    Line(Cow<'a, str>),
    /// `["a", "b"]`.
    Pair(Cow<'a, str>, Cow<'a, str>),
    /// Anything else (HF refuses the file).
    Bad,
}

impl Merge<'_> {
    /// The merge's two sides, as HF reads them: a line is split at its one space (HF refuses a
    /// line with none or more than one).
    ///
    /// # Errors
    /// The reason when HF would refuse the entry.
    pub(crate) fn sides(&self) -> std::result::Result<(&str, &str), String> {
        match self {
            Merge::Line(line) => match line.split_once(' ') {
                Some((a, b)) if !b.contains(' ') => Ok((a, b)),
                _ => Err(format!("bad merge {line:?}")),
            },
            Merge::Pair(a, b) => Ok((a, b)),
            Merge::Bad => Err("bad merge entry".into()),
        }
    }

    #[cfg(test)]
    fn from_value(value: Value) -> Merge<'static> {
        match value {
            Value::String(line) => Merge::Line(Cow::Owned(line)),
            Value::Array(pair) => match <[Value; 2]>::try_from(pair) {
                Ok([Value::String(a), Value::String(b)]) => Merge::Pair(Cow::Owned(a), Cow::Owned(b)),
                _ => Merge::Bad,
            },
            _ => Merge::Bad,
        }
    }
}

impl<'a> Doc<'a> {
    /// Parses `bytes`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidTokenizer`] when `bytes` are not JSON.
    pub(crate) fn parse(bytes: &'a [u8]) -> Result<Doc<'a>> {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let doc = Shaped(Top).deserialize(&mut de).and_then(|doc| de.end().map(|()| doc));
        let doc =
            doc.map_err(|e| Error::new(ErrorKind::InvalidTokenizer, format!("tokenizer is not valid JSON: {e}")))?;
        Ok(match doc {
            Either::Typed(doc) => doc,
            Either::Kept(json) => Doc { json, vocab: None, merges: None },
        })
    }

    /// The vocabulary's size (0 when it was not taken out: not an object of `u32` ids).
    pub(crate) fn vocab_len(&self) -> usize {
        self.vocab.as_ref().map_or(0, HashMap::len)
    }

    /// A token's model id.
    pub(crate) fn vocab_id(&self, token: &str) -> Option<u32> {
        self.vocab.as_ref().and_then(|v| v.get(token).copied())
    }
}

#[cfg(test)]
impl Doc<'static> {
    /// The document of a file already parsed into `json` (tests).
    pub(crate) fn from_value(mut json: Value) -> Doc<'static> {
        let (mut vocab, mut merges) = (None, None);
        if let Some(model) = json.get_mut("model").and_then(Value::as_object_mut) {
            if let Some(Value::Object(map)) = model.get("vocab") {
                let ids: Option<TokenIds<'static>> = map
                    .iter()
                    .map(|(k, v)| Some((Cow::Owned(k.clone()), v.as_u64().and_then(|i| u32::try_from(i).ok())?)))
                    .collect();
                if ids.is_some() {
                    model.remove("vocab");
                    vocab = ids;
                }
            }
            if let Some(Value::Array(_)) = model.get("merges") {
                if let Some(Value::Array(list)) = model.remove("merges") {
                    merges = Some(list.into_iter().map(Merge::from_value).collect());
                }
            }
        }
        Doc { json, vocab, merges }
    }
}

/// What a seed made of a JSON value: its own type when the value has the expected shape, else
/// the value as written.
enum Either<T> {
    Typed(T),
    Kept(Value),
}

/// How a seed reads the shape it expects (a map or a list); every other shape is kept as a
/// `Value`.
trait Shape<'de>: Sized {
    type Out;

    fn map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<Either<Self::Out>, A::Error> {
        Value::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Either::Kept)
    }

    fn seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<Either<Self::Out>, A::Error> {
        Value::deserialize(serde::de::value::SeqAccessDeserializer::new(seq)).map(Either::Kept)
    }

    fn unsigned(self, v: u64) -> Either<Self::Out> {
        Either::Kept(Value::from(v))
    }
}

struct Shaped<S>(S);

impl<'de, S: Shape<'de>> DeserializeSeed<'de> for Shaped<S> {
    type Value = Either<S::Out>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> std::result::Result<Self::Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de, S: Shape<'de>> Visitor<'de> for Shaped<S> {
    type Value = Either<S::Out>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<Self::Value, A::Error> {
        self.0.map(map)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<Self::Value, A::Error> {
        self.0.seq(seq)
    }
    fn visit_bool<E>(self, v: bool) -> std::result::Result<Self::Value, E> {
        Ok(Either::Kept(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> std::result::Result<Self::Value, E> {
        Ok(Either::Kept(Value::from(v)))
    }
    fn visit_u64<E>(self, v: u64) -> std::result::Result<Self::Value, E> {
        Ok(self.0.unsigned(v))
    }
    fn visit_f64<E>(self, v: f64) -> std::result::Result<Self::Value, E> {
        // As a `Value` reads it (a non-finite float cannot come from JSON text).
        Ok(Either::Kept(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)))
    }
    fn visit_str<E>(self, v: &str) -> std::result::Result<Self::Value, E> {
        Ok(Either::Kept(Value::String(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> std::result::Result<Self::Value, E> {
        Ok(Either::Kept(Value::String(v)))
    }
    fn visit_unit<E>(self) -> std::result::Result<Self::Value, E> {
        Ok(Either::Kept(Value::Null))
    }
    fn visit_none<E>(self) -> std::result::Result<Self::Value, E> {
        Ok(Either::Kept(Value::Null))
    }
}

/// The whole file: `model` read by [`ModelShape`], every other key as a `Value`.
struct Top;

impl<'de> Shape<'de> for Top {
    type Out = Doc<'de>;

    fn map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Either<Doc<'de>>, A::Error> {
        let mut rest = Map::new();
        let (mut vocab, mut merges) = (None, None);
        while let Some(key) = map.next_key::<String>()? {
            if key == "model" {
                let (model, v, m) = match map.next_value_seed(Shaped(ModelShape))? {
                    Either::Typed(parts) => parts,
                    Either::Kept(model) => (model, None, None),
                };
                (vocab, merges) = (v, m);
                rest.insert(key, model);
            } else {
                let value = map.next_value::<Value>()?;
                rest.insert(key, value);
            }
        }
        Ok(Either::Typed(Doc { json: Value::Object(rest), vocab, merges }))
    }
}

type ModelParts<'a> = (Value, Option<TokenIds<'a>>, Option<Vec<Merge<'a>>>);

/// The `model` object: `vocab` by [`VocabShape`], `merges` by [`MergesShape`], the rest as a `Value`.
struct ModelShape;

impl<'de> Shape<'de> for ModelShape {
    type Out = ModelParts<'de>;

    fn map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Either<ModelParts<'de>>, A::Error> {
        let mut rest = Map::new();
        let (mut vocab, mut merges) = (None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "vocab" => match map.next_value_seed(Shaped(VocabShape))? {
                    Either::Typed(ids) => {
                        rest.remove("vocab");
                        vocab = Some(ids);
                    }
                    Either::Kept(value) => {
                        vocab = None;
                        rest.insert(key, value);
                    }
                },
                "merges" => match map.next_value_seed(Shaped(MergesShape))? {
                    Either::Typed(list) => {
                        rest.remove("merges");
                        merges = Some(list);
                    }
                    Either::Kept(value) => {
                        merges = None;
                        rest.insert(key, value);
                    }
                },
                _ => {
                    let value = map.next_value::<Value>()?;
                    rest.insert(key, value);
                }
            }
        }
        Ok(Either::Typed((Value::Object(rest), vocab, merges)))
    }
}

/// A JSON string, borrowed from the file unless it has escapes.
struct CowStr<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for CowStr<'de> {
    fn deserialize<D: Deserializer<'de>>(de: D) -> std::result::Result<Self, D::Error> {
        de.deserialize_str(StrOr)
            .and_then(|s| s.ok_or_else(|| serde::de::Error::custom("expected a string")))
            .map(CowStr)
    }
}

/// A string (borrowed where it can be), or `None` for any other value (consumed whole).
struct StrOr;

impl<'de> DeserializeSeed<'de> for StrOr {
    type Value = Option<Cow<'de, str>>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> std::result::Result<Self::Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrOr {
    type Value = Option<Cow<'de, str>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> std::result::Result<Self::Value, E> {
        Ok(Some(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> std::result::Result<Self::Value, E> {
        Ok(Some(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> std::result::Result<Self::Value, E> {
        Ok(Some(Cow::Owned(v)))
    }
    fn visit_bool<E>(self, _: bool) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E>(self) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

/// `model.vocab` as a token → id map while every id fits a `u32`; from the first one that does
/// not, the whole object as a `Value`.
struct VocabShape;

impl<'de> Shape<'de> for VocabShape {
    type Out = TokenIds<'de>;

    fn map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Either<TokenIds<'de>>, A::Error> {
        let mut ids = TokenIds::with_capacity_and_hasher(map.size_hint().unwrap_or(0), ahash::RandomState::default());
        while let Some(CowStr(token)) = map.next_key::<CowStr<'de>>()? {
            // The id without a `Value` (a tenth of the vocabulary's parse).
            let value = match map.next_value_seed(Shaped(Id))? {
                Either::Typed(id) => {
                    ids.insert(token, id);
                    continue;
                }
                Either::Kept(value) => value,
            };
            // Not a vocabulary lopt reads: the rest as written, for HF to judge.
            let mut all: Map<String, Value> =
                ids.into_iter().map(|(k, id)| (k.into_owned(), Value::from(id))).collect();
            all.insert(token.into_owned(), value);
            while let Some((k, v)) = map.next_entry::<String, Value>()? {
                all.insert(k, v);
            }
            return Ok(Either::Kept(Value::Object(all)));
        }
        Ok(Either::Typed(ids))
    }
}

/// A vocabulary id: an integer that fits a `u32`, else the value as written.
struct Id;

impl Shape<'_> for Id {
    type Out = u32;

    fn unsigned(self, v: u64) -> Either<u32> {
        u32::try_from(v).map_or_else(|_| Either::Kept(Value::from(v)), Either::Typed)
    }
}

/// `model.merges` as a list of [`Merge`]s.
struct MergesShape;

impl<'de> Shape<'de> for MergesShape {
    type Out = Vec<Merge<'de>>;

    fn seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Either<Vec<Merge<'de>>>, A::Error> {
        let mut list = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(merge) = seq.next_element_seed(MergeSeed)? {
            list.push(merge);
        }
        Ok(Either::Typed(list))
    }
}

struct MergeSeed;

impl<'de> DeserializeSeed<'de> for MergeSeed {
    type Value = Merge<'de>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> std::result::Result<Merge<'de>, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MergeSeed {
    type Value = Merge<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a merge")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> std::result::Result<Merge<'de>, E> {
        Ok(Merge::Line(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> std::result::Result<Merge<'de>, E> {
        Ok(Merge::Line(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> std::result::Result<Merge<'de>, E> {
        Ok(Merge::Line(Cow::Owned(v)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Merge<'de>, A::Error> {
        let a = seq.next_element_seed(StrOr)?;
        let b = if a.is_some() { seq.next_element_seed(StrOr)? } else { None };
        let more = b.is_some() && seq.next_element::<IgnoredAny>()?.is_some();
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(match (a, b, more) {
            (Some(Some(a)), Some(Some(b)), false) => Merge::Pair(a, b),
            _ => Merge::Bad,
        })
    }
    fn visit_bool<E>(self, _: bool) -> std::result::Result<Merge<'de>, E> {
        Ok(Merge::Bad)
    }
    fn visit_i64<E>(self, _: i64) -> std::result::Result<Merge<'de>, E> {
        Ok(Merge::Bad)
    }
    fn visit_u64<E>(self, _: u64) -> std::result::Result<Merge<'de>, E> {
        Ok(Merge::Bad)
    }
    fn visit_f64<E>(self, _: f64) -> std::result::Result<Merge<'de>, E> {
        Ok(Merge::Bad)
    }
    fn visit_unit<E>(self) -> std::result::Result<Merge<'de>, E> {
        Ok(Merge::Bad)
    }
    fn visit_none<E>(self) -> std::result::Result<Merge<'de>, E> {
        Ok(Merge::Bad)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Merge<'de>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Merge::Bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed parse equals the `Value` parse on `text`.
    fn same(text: &str) -> Doc<'_> {
        let doc = Doc::parse(text.as_bytes()).unwrap();
        let via_value = Doc::from_value(serde_json::from_str(text).unwrap());
        assert_eq!(doc, via_value, "{text}");
        doc
    }

    #[test]
    fn hostile_shapes_parse_as_through_a_value() {
        for text in [
            r#"{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "a": 7}, "merges": ["a b", ["a", "b"], "x"]}}"#,
            r#"{"model": {"vocab": {"\u0061\"": 0, "b": 4294967295}, "merges": ["\u0061 b", ["\u0061", "b"]]}}"#,
            r#"{"model": {"vocab": {"a": 0, "b": -1, "c": 2}, "merges": {"a": "b"}}}"#,
            r#"{"model": {"vocab": {"a": 0, "b": 4294967296}, "merges": null}}"#,
            r#"{"model": {"vocab": {"a": 1.0}, "merges": [["a"], ["a", "b", "c"], ["a", 1], [[]], 3, {"a": 1}, null, []]}}"#,
            r#"{"model": {"vocab": [["a", 0.0], ["b", -1.5]], "merges": []}}"#,
            r#"{"model": {"vocab": {"a": 0}, "vocab": {"b": 1}, "merges": ["a b"], "merges": 4}}"#,
            r#"{"model": {"vocab": {"a": 0}, "merges": ["a b"]}, "model": {"type": "WordPiece"}}"#,
            r#"{"model": 3, "added_tokens": [{"id": 1}], "normalizer": null}"#,
            r#"{"model": {"vocab": {}, "merges": []}}"#,
            r#"[1, {"model": {"vocab": {"a": 0}}}]"#,
            r#""model""#,
            "null",
        ] {
            same(text);
        }
        let doc = same(r#"{"model": {"vocab": {"a": 0, "a": 7, "\u00e9": 2}, "merges": ["a b c", "a"]}}"#);
        assert_eq!(doc.vocab_id("a"), Some(7));
        assert_eq!(doc.vocab_id("é"), Some(2));
        assert_eq!(doc.vocab_len(), 2);
        let merges = doc.merges.as_ref().unwrap();
        assert!(merges[0].sides().is_err() && merges[1].sides().is_err());
    }

    #[test]
    fn plain_strings_are_borrowed() {
        let doc = Doc::parse(br#"{"model": {"vocab": {"ab": 0, "\n": 1}, "merges": ["a b", ["a", "\t"]]}}"#).unwrap();
        let vocab = doc.vocab.as_ref().unwrap();
        assert!(vocab.keys().all(|k| matches!(k, Cow::Borrowed(_)) == (k.as_ref() == "ab")));
        assert!(matches!(
            doc.merges.as_deref(),
            Some([Merge::Line(Cow::Borrowed(_)), Merge::Pair(Cow::Borrowed(_), Cow::Owned(_))])
        ));
    }

    #[test]
    fn malformed_json_is_one_typed_error() {
        for text in ["", "{", r#"{"model": {"vocab": {"a": 0,}}}"#, r#"{"model": {"merges": ["a b"]}} x"#, "\u{ff}"] {
            let err = Doc::parse(text.as_bytes()).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidTokenizer);
            assert!(!err.to_string().contains('\n'));
        }
    }
}
