//! A JSON document serialized once, with holes where the values that change
//! go: GitHub's example payloads and answers, filled in per delivery or
//! call without cloning or serializing the whole document again (a
//! document is kilobytes; what changes is a few fields).

use serde_json::Value;

/// A serialized document with holes, filled by [`Template::render`].
#[derive(Debug, Clone)]
pub(crate) struct Template {
    /// The text around the holes: one more piece than holes.
    pieces: Vec<String>,
    /// Which value each hole takes, in the order the holes come.
    holes: Vec<usize>,
}

/// The text a hole is marked with while the document is serialized.
fn mark(k: usize) -> String {
    format!("\u{1}hole{k}\u{1}")
}

impl Template {
    /// `value` with a hole at each of `holes` (JSON pointers; a missing
    /// field is added to its object). A pointer whose parent is not an
    /// object is left out.
    pub(crate) fn new(mut value: Value, holes: &[&str]) -> Template {
        for (k, pointer) in holes.iter().enumerate() {
            let (parent, key) = pointer.rsplit_once('/').unwrap_or(("", pointer));
            if let Some(object) = value.pointer_mut(parent).and_then(Value::as_object_mut) {
                object.insert(key.to_owned(), Value::String(mark(k)));
            }
        }
        let text = serde_json::to_string(&value).unwrap_or_default();
        let mut found: Vec<(usize, usize, usize)> = (0..holes.len())
            .filter_map(|k| {
                let quoted = serde_json::to_string(&mark(k)).ok()?;
                text.find(&quoted).map(|at| (at, at + quoted.len(), k))
            })
            .collect();
        found.sort_unstable();
        let mut pieces = Vec::with_capacity(found.len() + 1);
        let mut from = 0;
        for &(start, end, _) in &found {
            pieces.push(text[from..start].to_owned());
            from = end;
        }
        pieces.push(text[from..].to_owned());
        Template {
            pieces,
            holes: found.into_iter().map(|(_, _, k)| k).collect(),
        }
    }

    /// The document with hole `k` holding `values[k]` (each already JSON).
    pub(crate) fn render(&self, values: &[&str]) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            self.pieces.iter().map(String::len).sum::<usize>()
                + values.iter().map(|v| v.len()).sum::<usize>(),
        );
        for (piece, hole) in self.pieces.iter().zip(&self.holes) {
            out.extend_from_slice(piece.as_bytes());
            out.extend_from_slice(values.get(*hole).copied().unwrap_or("null").as_bytes());
        }
        if let Some(last) = self.pieces.last() {
            out.extend_from_slice(last.as_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // The rendered document is the one a clone with the fields set would
    // serialize to, whatever order the holes come in; a missing field is
    // added.
    #[test]
    fn a_template_renders_as_the_changed_document() {
        let doc = json!({"a": {"id": 1, "name": "x", "keep": [1, 2]}, "b": true});
        let template = Template::new(doc.clone(), &["/a/name", "/a/id", "/a/new", "/b"]);
        let rendered = template.render(&["\"y\"", "7", "[\"l\"]", "false"]);
        let mut expected = doc;
        expected["a"]["name"] = json!("y");
        expected["a"]["id"] = json!(7);
        expected["a"]["new"] = json!(["l"]);
        expected["b"] = json!(false);
        let got: Value = serde_json::from_slice(&rendered).unwrap();
        assert_eq!(got, expected);
    }
}
