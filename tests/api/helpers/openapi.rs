//! The OpenAPI document as a test oracle: finds the documented response of a method, path and status, validates a
//! JSON body against its schema, and (`Oracle`) checks whole responses while recording the routes that answered. The validator covers the subset utoipa emits (`$ref`, `type` including
//! lists with `null`, `properties`, `required`, `additionalProperties`, `items`, `enum`, `oneOf`/`anyOf`/`allOf`,
//! `minimum`/`maximum`, `minLength`/`maxLength`, `minItems`/`maxItems`, the `uuid` and `date-time` formats; a
//! `pattern` stops the test, since it is not checked) and is stricter than JSON Schema in one way on purpose: an object schema that
//! lists `properties` and says nothing of `additionalProperties` is closed, so a field sent but not documented fails
//! just like a field documented but not sent.
#![allow(dead_code)] // Each test file uses a different part of this helper.

use std::collections::BTreeSet;

use reqwest::header::CONTENT_TYPE;
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::helpers::{TestApp, TestResponse};

/// The document served at `/api/openapi.json`.
pub struct Document(pub Value);

/// What the document says a response carries.
pub enum Documented<'a> {
    /// No `content`: the body must be empty (204).
    Empty,
    /// Media type -> schema (absent when the document gives none).
    Content(Vec<(&'a str, Option<&'a Value>)>),
}

impl Document {
    /// The response documented for `method` (any case) on the path template, or why there is none.
    pub fn response(&self, method: &str, template: &str, status: u16) -> Result<Documented<'_>, String> {
        let operation = &self.0["paths"][template][method.to_ascii_lowercase()];
        if !operation.is_object() {
            return Err(format!("{method} {template} is not documented"));
        }
        let response = operation["responses"]
            .get(status.to_string())
            .ok_or_else(|| format!("{method} {template} does not document status {status}"))?;
        let response = self.resolve(response);
        match response.get("content").and_then(Value::as_object) {
            None => Ok(Documented::Empty),
            Some(content) => Ok(Documented::Content(
                content
                    .iter()
                    .map(|(media, body)| (media.as_str(), body.get("schema")))
                    .collect(),
            )),
        }
    }

    /// A named component schema.
    pub fn component(&self, name: &str) -> &Value {
        let schema = &self.0["components"]["schemas"][name];
        assert!(schema.is_object(), "no component schema {name}");
        schema
    }

    /// Every mismatch between `value` and `schema`, each with its JSON path; empty when the value conforms.
    pub fn validate(&self, schema: &Value, value: &Value) -> Vec<String> {
        let mut problems = Vec::new();
        self.check(schema, value, "$", false, &mut problems);
        problems
    }

    /// Follows `$ref`s (`#/...` only) to the schema they name.
    fn resolve<'a>(&'a self, mut schema: &'a Value) -> &'a Value {
        for _ in 0..32 {
            let Some(reference) = schema.get("$ref").and_then(Value::as_str) else {
                return schema;
            };
            let pointer = reference
                .strip_prefix('#')
                .unwrap_or_else(|| panic!("only local references are supported: {reference}"));
            schema = self
                .0
                .pointer(pointer)
                .unwrap_or_else(|| panic!("dangling reference {reference}"));
        }
        panic!("reference cycle at {schema}")
    }

    /// `open`: unknown properties are left to an enclosing `allOf`, which knows every member's properties.
    fn check(&self, schema: &Value, value: &Value, path: &str, open: bool, problems: &mut Vec<String>) {
        let schema = self.resolve(schema);
        if let Some(members) = schema.get("allOf").and_then(Value::as_array) {
            for member in members {
                self.check(member, value, path, true, problems);
            }
            if !open && let (Some(object), Some(known)) = (value.as_object(), self.known_properties(schema)) {
                for key in object.keys().filter(|k| !known.contains(k.as_str())) {
                    problems.push(format!("{path}.{key}: not documented"));
                }
            }
        }
        if let Some(options) = schema.get("oneOf").and_then(Value::as_array) {
            let matching = options.iter().filter(|o| self.conforms(o, value, open)).count();
            if matching != 1 {
                problems.push(format!(
                    "{path}: matches {matching} of the oneOf options, not exactly one: {value}"
                ));
            }
        }
        if let Some(options) = schema.get("anyOf").and_then(Value::as_array)
            && !options.iter().any(|o| self.conforms(o, value, open))
        {
            problems.push(format!("{path}: matches none of the anyOf options: {value}"));
        }
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
            && !allowed.contains(value)
        {
            problems.push(format!("{path}: {value} is not one of {allowed:?}"));
        }
        if let Some(types) = schema.get("type") {
            let types: Vec<&str> = match types {
                Value::String(t) => vec![t.as_str()],
                Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
                other => panic!("unexpected type keyword {other}"),
            };
            if !types.iter().any(|t| has_type(value, t)) {
                problems.push(format!("{path}: expected {}, got {value}", types.join(" or ")));
                return;
            }
        }
        if let (Some(minimum), Some(number)) = (schema.get("minimum").and_then(Value::as_f64), value.as_f64())
            && number < minimum
        {
            problems.push(format!("{path}: {number} is below the minimum {minimum}"));
        }
        if let (Some(maximum), Some(number)) = (schema.get("maximum").and_then(Value::as_f64), value.as_f64())
            && number > maximum
        {
            problems.push(format!("{path}: {number} is above the maximum {maximum}"));
        }
        assert!(
            schema.get("pattern").is_none(),
            "{path}: `pattern` is not supported by this validator; teach it before documenting one"
        );
        if let Some(text) = value.as_str() {
            let length = text.chars().count() as u64;
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                && length < min
            {
                problems.push(format!("{path}: {length} characters, fewer than minLength {min}"));
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                && length > max
            {
                problems.push(format!("{path}: {length} characters, more than maxLength {max}"));
            }
            match schema.get("format").and_then(Value::as_str) {
                Some("uuid") if uuid::Uuid::parse_str(text).is_err() => {
                    problems.push(format!("{path}: {text:?} is not a uuid"))
                }
                Some("date-time") if chrono::DateTime::parse_from_rfc3339(text).is_err() => {
                    problems.push(format!("{path}: {text:?} is not an RFC 3339 date-time"))
                }
                _ => {}
            }
        }
        if let Some(items) = value.as_array() {
            let count = items.len() as u64;
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
                && count < min
            {
                problems.push(format!("{path}: {count} items, fewer than minItems {min}"));
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && count > max
            {
                problems.push(format!("{path}: {count} items, more than maxItems {max}"));
            }
        }
        match value {
            Value::Object(object) => self.check_object(schema, object, path, open, problems),
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items") {
                    for (i, item) in items.iter().enumerate() {
                        self.check(item_schema, item, &format!("{path}[{i}]"), false, problems);
                    }
                }
            }
            _ => {}
        }
    }

    fn check_object(
        &self,
        schema: &Value,
        object: &serde_json::Map<String, Value>,
        path: &str,
        open: bool,
        problems: &mut Vec<String>,
    ) {
        let properties = schema.get("properties").and_then(Value::as_object);
        for required in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
            let name = required.as_str().unwrap_or_default();
            if !object.contains_key(name) {
                problems.push(format!("{path}.{name}: required but absent"));
            }
        }
        for (key, inner) in object {
            let inner_path = format!("{path}.{key}");
            if let Some(property) = properties.and_then(|p| p.get(key)) {
                self.check(property, inner, &inner_path, false, problems);
                continue;
            }
            match schema.get("additionalProperties") {
                Some(Value::Bool(false)) => problems.push(format!("{inner_path}: not documented")),
                Some(Value::Bool(true)) => {}
                Some(extra) => self.check(extra, inner, &inner_path, false, problems),
                // Closed unless an enclosing allOf speaks for the other members.
                None if properties.is_some() && !open => problems.push(format!("{inner_path}: not documented")),
                None => {}
            }
        }
    }

    fn conforms(&self, schema: &Value, value: &Value, open: bool) -> bool {
        let mut problems = Vec::new();
        self.check(schema, value, "$", open, &mut problems);
        problems.is_empty()
    }

    /// The property names an `allOf` documents across its members; `None` when one of them admits any.
    fn known_properties(&self, schema: &Value) -> Option<BTreeSet<String>> {
        let schema = self.resolve(schema);
        let mut known = BTreeSet::new();
        if matches!(
            schema.get("additionalProperties"),
            Some(Value::Bool(true) | Value::Object(_))
        ) {
            return None;
        }
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            known.extend(properties.keys().cloned());
        }
        for member in schema.get("allOf").and_then(Value::as_array).into_iter().flatten() {
            known.extend(self.known_properties(member)?);
        }
        Some(known)
    }
}

/// Checks real responses against the document and remembers which routes answered with a success.
pub struct Oracle {
    pub doc: Document,
    pub succeeded: BTreeSet<(String, String)>,
}

impl Oracle {
    pub async fn new(app: &TestApp) -> Oracle {
        let (status, doc) = app.request(Method::GET, "/api/openapi.json", None, None).await;
        assert_eq!(status, StatusCode::OK);
        Oracle {
            doc: Document(doc),
            succeeded: BTreeSet::new(),
        }
    }

    /// The status must be documented for the route, the media type too, and a JSON body must fit its schema.
    #[track_caller]
    pub fn check(&mut self, method: &str, template: &str, response: &TestResponse) {
        let status = response.status.as_u16();
        let media = response
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|v| v.trim().to_ascii_lowercase());
        self.check_parts(method, template, status, media.as_deref(), &response.body);
    }

    #[track_caller]
    pub fn check_parts(&mut self, method: &str, template: &str, status: u16, media: Option<&str>, body: &Value) {
        let what = format!("{method} {template} -> {status}");
        match self
            .doc
            .response(method, template, status)
            .unwrap_or_else(|e| panic!("{e}: {body}"))
        {
            Documented::Empty => assert!(body.is_null(), "{what} documents no body, got {body}"),
            Documented::Content(content) => {
                let media = media.unwrap_or_else(|| panic!("{what} has no Content-Type"));
                let (_, schema) = content
                    .iter()
                    .find(|(documented, _)| *documented == media)
                    .unwrap_or_else(|| panic!("{what} answered {media}, the document says {:?}", content));
                if media == "application/json" {
                    let schema = schema.unwrap_or_else(|| panic!("{what} documents JSON without a schema"));
                    let problems = self.doc.validate(schema, body);
                    assert!(
                        problems.is_empty(),
                        "{what} disagrees with the document:\n{}\nbody: {body:#}",
                        problems.join("\n")
                    );
                }
            }
        }
        if (200..300).contains(&status) {
            self.succeeded.insert((method.to_string(), template.to_string()));
        }
    }
}

/// The JSON `data` of the stream's `final` event.
pub fn final_event(text: &str) -> Value {
    let block = text
        .split("\n\n")
        .find(|block| block.lines().any(|l| l == "event: final"))
        .unwrap_or_else(|| panic!("a final event in {text}"));
    let data: Vec<&str> = block.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    serde_json::from_str(&data.join("\n")).expect("final data is JSON")
}

fn has_type(value: &Value, name: &str) -> bool {
    match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        other => panic!("unknown schema type {other}"),
    }
}

#[test]
fn the_validator_refuses_what_the_schema_does_not_allow() {
    let doc = Document(serde_json::json!({"components": {"schemas": {
        "Thing": {"type": "object", "required": ["a"], "properties": {
            "a": {"type": "integer", "minimum": 0},
            "b": {"type": ["string", "null"]},
            "c": {"type": "string", "enum": ["x", "y"]},
        }},
        "Named": {"allOf": [{"$ref": "#/components/schemas/Thing"}, {"type": "object", "properties": {"n": {"type": "string"}}}]},
        "Either": {"oneOf": [{"$ref": "#/components/schemas/Thing"}, {"type": "object", "required": ["e"], "properties": {"e": {"type": "string"}}}]},
    }}}));
    let thing = doc.component("Thing");
    assert!(
        doc.validate(thing, &serde_json::json!({"a": 1, "b": null, "c": "x"}))
            .is_empty()
    );
    for bad in [
        serde_json::json!({"b": "s"}),
        serde_json::json!({"a": -1}),
        serde_json::json!({"a": 1.5}),
        serde_json::json!({"a": 1, "c": "z"}),
        serde_json::json!({"a": 1, "extra": true}),
        serde_json::json!([1]),
    ] {
        assert!(!doc.validate(thing, &bad).is_empty(), "{bad} should fail");
    }
    let named = doc.component("Named");
    assert!(doc.validate(named, &serde_json::json!({"a": 1, "n": "x"})).is_empty());
    assert!(
        !doc.validate(named, &serde_json::json!({"a": 1, "n": "x", "z": 0}))
            .is_empty()
    );
    let either = doc.component("Either");
    assert!(doc.validate(either, &serde_json::json!({"e": "x"})).is_empty());
    assert!(doc.validate(either, &serde_json::json!({"a": 0})).is_empty());
    assert!(!doc.validate(either, &serde_json::json!({"a": 0, "e": "x"})).is_empty());
}
