//! The protobuf text format for Distbench messages.
//!
//! Parsing goes through `prost_reflect`'s text parser (the descriptors of
//! [`crate::proto::pool`]) and is then transcoded into the prost type, so
//! every upstream textproto (comments, single-quoted strings, `,`/`;`
//! separators, `key: {..}` map entries) reads as upstream reads it. Errors
//! name `file:line:col`, as compilers do, and say what was expected.

use crate::Error;
use crate::proto::{self, TestSequence};
use miette::Diagnostic;
use prost::{Message, Name};
use prost_reflect::{DynamicMessage, FieldDescriptor, MessageDescriptor, ReflectMessage, Value};

/// A text-format problem, located in its file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {message}")]
pub struct TextError {
    /// The file (or label) the text came from.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What is wrong, and what was expected.
    pub message: String,
}

/// The 1-based line and column (in characters) of a byte offset of `text`.
/// Offsets past the end, or inside a character, are clamped.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

fn descriptor_of<T: Name>() -> Result<MessageDescriptor, String> {
    proto::descriptor::<T>()
        .ok_or_else(|| format!("message type {} is missing from the schema", T::full_name()))
}

/// Parses `text` as a message of type `T`; `file` labels errors.
pub fn parse<T: Message + Default + Name>(text: &str, file: &str) -> Result<T, TextError> {
    let at_start = |message: String| TextError {
        file: file.to_string(),
        line: 1,
        column: 1,
        message,
    };
    let desc = descriptor_of::<T>().map_err(at_start)?;
    let dynamic = DynamicMessage::parse_text_format(desc, text).map_err(|e| {
        // Errors without a span (end of input, map keys) point at the end.
        let offset = e
            .labels()
            .and_then(|mut labels| labels.next())
            .map_or(text.len(), |l| l.offset());
        let (line, column) = line_col(text, offset);
        TextError {
            file: file.to_string(),
            line,
            column,
            message: reword(&e.to_string()),
        }
    })?;
    dynamic.transcode_to::<T>().map_err(|e| {
        at_start(format!(
            "the parsed {} does not convert to rackbench's type: {e}",
            T::full_name()
        ))
    })
}

/// Formats `msg` in the text format as upstream's printer does: one field
/// per line, nested messages indented by two spaces, fields in field-number
/// order, repeated fields (and map entries, sorted by key) one element per
/// line. Fails only if the type is missing from the
/// schema.
pub fn format<T: Message + Name>(msg: &T) -> Result<String, Error> {
    let name = T::full_name();
    let desc = proto::flat_map_pool()
        .get_message_by_name(&name)
        .ok_or_else(|| Error::Host(format!("message type {name} is missing from the schema")))?;
    let dynamic = DynamicMessage::decode(desc, msg.encode_to_vec().as_slice())
        .map_err(|e| Error::Host(format!("cannot convert {name} for printing: {e}")))?;
    let mut out = String::new();
    write_message(&mut out, &dynamic, 0);
    Ok(out)
}

fn write_message(out: &mut String, msg: &DynamicMessage, indent: usize) {
    for field in msg.descriptor().fields() {
        if !msg.has_field(&field) {
            continue;
        }
        match &*msg.get_field(&field) {
            Value::List(items) => {
                for item in items {
                    write_field(out, &field, item, indent);
                }
            }
            value => write_field(out, &field, value, indent),
        }
    }
}

fn write_field(out: &mut String, field: &FieldDescriptor, value: &Value, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
    out.push_str(field.name());
    match value {
        Value::Message(m) => {
            out.push_str(" {\n");
            write_message(out, m, indent + 2);
            out.extend(std::iter::repeat_n(' ', indent));
            out.push('}');
        }
        Value::EnumNumber(n) => {
            let name = field
                .kind()
                .as_enum()
                .and_then(|e| e.get_value(*n))
                .map_or_else(|| n.to_string(), |v| v.name().to_string());
            out.push_str(&format!(": {name}"));
        }
        Value::String(s) => {
            out.push_str(": ");
            quote(out, s.as_bytes(), true);
        }
        Value::Bytes(b) => {
            out.push_str(": ");
            quote(out, b, false);
        }
        Value::F32(v) => out.push_str(&format!(": {}", float(f64::from(*v), v.to_string()))),
        Value::F64(v) => out.push_str(&format!(": {}", float(*v, v.to_string()))),
        Value::Bool(v) => out.push_str(&format!(": {v}")),
        Value::I32(v) => out.push_str(&format!(": {v}")),
        Value::I64(v) => out.push_str(&format!(": {v}")),
        Value::U32(v) => out.push_str(&format!(": {v}")),
        Value::U64(v) => out.push_str(&format!(": {v}")),
        // Lists are unrolled by the caller, and the flat-map schema has no
        // maps; neither can nest here.
        Value::List(_) | Value::Map(_) => {}
    }
    out.push('\n');
}

/// Text-format spelling of a float; `shortest` is Rust's shortest
/// round-tripping decimal of the value at its own precision.
fn float(v: f64, shortest: String) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        shortest
    }
}

/// A double-quoted string literal; `utf8` keeps non-ASCII text readable,
/// otherwise every byte outside printable ASCII is an octal escape.
fn quote(out: &mut String, bytes: &[u8], utf8: bool) {
    out.push('"');
    let text = if utf8 {
        std::str::from_utf8(bytes).ok()
    } else {
        None
    };
    let escape = |out: &mut String, c: u32| match c {
        0x5c => out.push_str("\\\\"),
        0x22 => out.push_str("\\\""),
        0x0a => out.push_str("\\n"),
        0x0d => out.push_str("\\r"),
        0x09 => out.push_str("\\t"),
        0x20..=0x7e => out.push(char::from_u32(c).unwrap_or('?')),
        _ => out.push_str(&format!("\\{c:03o}")),
    };
    match text {
        Some(t) => {
            for ch in t.chars() {
                if ch.is_ascii() {
                    escape(out, u32::from(ch));
                } else {
                    out.push(ch);
                }
            }
        }
        None => bytes.iter().for_each(|b| escape(out, u32::from(*b))),
    }
    out.push('"');
}

/// Parses a Distbench test sequence (what `--infile` holds).
pub fn parse_test_sequence(text: &str, file: &str) -> Result<TestSequence, TextError> {
    parse(text, file)
}

/// Formats a test sequence as text.
pub fn format_test_sequence(seq: &TestSequence) -> Result<String, Error> {
    format(seq)
}

/// Turns the parser's wording into ours, and suggests the field meant when
/// an unknown field name is close to a known one.
fn reword(message: &str) -> String {
    let Some((field, message_name)) = unknown_field(message) else {
        return message.to_string();
    };
    let mut out = format!("unknown field '{field}' in {message_name}");
    if let Some(desc) = proto::pool().get_message_by_name(message_name) {
        let names: Vec<String> = desc.fields().map(|f| f.name().to_string()).collect();
        if let Some(best) = closest(field, &names) {
            out.push_str(&format!(" (did you mean '{best}'?)"));
        } else {
            out.push_str(&format!("; its fields are: {}", names.join(", ")));
        }
    }
    out
}

/// Picks `field 'X' not found for message 'Y'` apart.
fn unknown_field(message: &str) -> Option<(&str, &str)> {
    let rest = message.strip_prefix("field '")?;
    let (field, rest) = rest.split_once("' not found for message '")?;
    let message_name = rest.strip_suffix('\'')?;
    Some((field, message_name))
}

/// The candidate within edit distance 2 (or a third of the length) of `word`.
fn closest<'a>(word: &str, candidates: &'a [String]) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(2);
    harness::suggest::nearest(word, candidates.iter().map(String::as_str), limit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::DistributedSystemDescription;

    #[test]
    fn line_col_counts_lines_and_characters() {
        let text = "ab\ncdé\nf";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 3), (2, 1));
        // 'é' is two bytes; offset 7 is just after it.
        assert_eq!(line_col(text, 7), (2, 4));
        assert_eq!(line_col(text, 6), (2, 3), "inside a character clamps back");
        assert_eq!(line_col(text, 100), (3, 2), "past the end clamps");
    }

    #[test]
    fn unknown_field_names_position_and_suggestion() {
        let text = "tests {\n  name: 'a'\n  servces { name: 'x' }\n}\n";
        let err = parse_test_sequence(text, "tests.cfg").unwrap_err();
        assert_eq!((err.line, err.column), (3, 3));
        assert_eq!(
            err.to_string(),
            "tests.cfg:3:3: unknown field 'servces' in distbench.DistributedSystemDescription \
             (did you mean 'services'?)"
        );
    }

    #[test]
    fn unknown_field_far_from_any_lists_the_fields() {
        let err = parse::<DistributedSystemDescription>("zzzzzzzzzzzzz: 1", "t").unwrap_err();
        assert!(err.message.contains("its fields are: "), "{err}");
        assert!(err.message.contains("rpc_descriptions"), "{err}");
    }

    #[test]
    fn wrong_value_type_says_what_was_expected() {
        let text = "tests {\n  services { name: 'x' count: 'many' }\n}";
        let err = parse_test_sequence(text, "seq.txt").unwrap_err();
        assert_eq!((err.file.as_str(), err.line), ("seq.txt", 2));
        assert_eq!(err.column, 31);
        assert!(err.message.contains("expected"), "{err}");
    }

    #[test]
    fn unterminated_message_points_at_the_end() {
        let text = "tests {\n  name: 'a'\n";
        let err = parse_test_sequence(text, "f").unwrap_err();
        assert_eq!((err.line, err.column), (3, 1));
        assert!(err.message.contains("end of input"), "{err}");
    }

    #[test]
    fn parses_upstream_syntax_and_keeps_defaults_unset() {
        let text = r#"
            # a comment
            tests {
              name: 'x'
              attributes: { key: 'k' value: 'v' }
              rpc_descriptions { name: "r", client: 'c'; server: 's' }
            }"#;
        let seq = parse_test_sequence(text, "t").unwrap();
        let test = &seq.tests[0];
        assert_eq!(test.name(), "x");
        assert_eq!(test.attributes.get("k").map(String::as_str), Some("v"));
        let rpc = &test.rpc_descriptions[0];
        assert_eq!(rpc.client, vec!["c".to_string()]);
        assert_eq!(rpc.fanout_filter, None, "unset stays unset");
        assert_eq!(rpc.fanout_filter(), "all", "upstream default");
        assert_eq!(test.default_protocol(), "grpc");
    }

    #[test]
    fn format_then_parse_gives_the_same_message() {
        let text = "tests { name: 'x' services { name: 's' count: 2 x_size: 2 } }";
        let seq = parse_test_sequence(text, "t").unwrap();
        let printed = format_test_sequence(&seq).unwrap();
        assert!(printed.contains("name: \"x\""), "{printed}");
        assert_eq!(parse_test_sequence(&printed, "printed").unwrap(), seq);
    }

    #[test]
    fn printing_is_upstream_style_and_escapes_strings() {
        let text = "tests { attributes { key: 'b' value: '2' } attributes { key: 'a' value: '1' } \
                    name: 'quote\\\" tab\\t é' \
                    services { name: 's' } services { name: 't' count: 3 } \
                    distribution_config { pmf_points { pmf: 0.25 } } \
                    service_constraints { key: 'k' value { constraint_sets { constraints { relation: EQUAL } } } } }";
        let seq = parse_test_sequence(text, "t").unwrap();
        let printed = format_test_sequence(&seq).unwrap();
        let want = r#"tests {
  services {
    name: "s"
  }
  services {
    name: "t"
    count: 3
  }
  name: "quote\" tab\t é"
  attributes {
    key: "a"
    value: "1"
  }
  attributes {
    key: "b"
    value: "2"
  }
  distribution_config {
    pmf_points {
      pmf: 0.25
    }
  }
  service_constraints {
    key: "k"
    value {
      constraint_sets {
        constraints {
          relation: EQUAL
        }
      }
    }
  }
}
"#;
        assert_eq!(printed, want);
        assert_eq!(parse_test_sequence(&printed, "printed").unwrap(), seq);
    }
}
