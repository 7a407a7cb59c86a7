//! Condition operator names: `[ForAllValues:|ForAnyValue:]<Base>[IfExists]`.

use std::fmt;

/// The set qualifier for multivalued context keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetQualifier {
    /// No qualifier: single-valued comparison.
    Single,
    /// `ForAllValues:` every request value must satisfy the operator (true when the key is absent).
    ForAllValues,
    /// `ForAnyValue:` at least one request value must satisfy it (false when the key is absent).
    ForAnyValue,
}

macro_rules! base_operators {
    ($($name:ident),* $(,)?) => {
        /// The comparison itself.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Base { $($name),* }

        impl Base {
            pub const ALL: &'static [Base] = &[$(Base::$name),*];

            pub fn name(self) -> &'static str {
                match self { $(Base::$name => stringify!($name)),* }
            }
        }
    };
}

base_operators!(
    StringEquals,
    StringNotEquals,
    StringEqualsIgnoreCase,
    StringNotEqualsIgnoreCase,
    StringLike,
    StringNotLike,
    NumericEquals,
    NumericNotEquals,
    NumericLessThan,
    NumericLessThanEquals,
    NumericGreaterThan,
    NumericGreaterThanEquals,
    DateEquals,
    DateNotEquals,
    DateLessThan,
    DateLessThanEquals,
    DateGreaterThan,
    DateGreaterThanEquals,
    Bool,
    BinaryEquals,
    IpAddress,
    NotIpAddress,
    ArnEquals,
    ArnLike,
    ArnNotEquals,
    ArnNotLike,
    Null,
);

impl Base {
    /// Negated operators are true when the value matches none of the policy values, and true when
    /// the key is absent.
    pub fn negated(self) -> bool {
        matches!(
            self,
            Base::StringNotEquals
                | Base::StringNotEqualsIgnoreCase
                | Base::StringNotLike
                | Base::NumericNotEquals
                | Base::DateNotEquals
                | Base::NotIpAddress
                | Base::ArnNotEquals
                | Base::ArnNotLike
        )
    }

    /// The positive operator a negated one is the complement of (itself when not negated).
    pub fn positive(self) -> Base {
        match self {
            Base::StringNotEquals => Base::StringEquals,
            Base::StringNotEqualsIgnoreCase => Base::StringEqualsIgnoreCase,
            Base::StringNotLike => Base::StringLike,
            Base::NumericNotEquals => Base::NumericEquals,
            Base::DateNotEquals => Base::DateEquals,
            Base::NotIpAddress => Base::IpAddress,
            Base::ArnNotEquals => Base::ArnEquals,
            Base::ArnNotLike => Base::ArnLike,
            other => other,
        }
    }

    /// Whether policy variables are substituted in this operator's values.
    pub fn takes_variables(self) -> bool {
        let name = self.name();
        name.starts_with("String") || name.starts_with("Arn")
    }
}

/// A parsed operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operator {
    pub set: SetQualifier,
    pub base: Base,
    pub if_exists: bool,
}

impl Operator {
    /// Parses an operator name. Names are case-sensitive, as IAM's are.
    pub fn parse(name: &str) -> Result<Operator, String> {
        let (set, rest) = if let Some(rest) = name.strip_prefix("ForAllValues:") {
            (SetQualifier::ForAllValues, rest)
        } else if let Some(rest) = name.strip_prefix("ForAnyValue:") {
            (SetQualifier::ForAnyValue, rest)
        } else {
            (SetQualifier::Single, name)
        };
        let (if_exists, base_name) = match rest.strip_suffix("IfExists") {
            Some(base) => (true, base),
            None => (false, rest),
        };
        let base = Base::ALL
            .iter()
            .copied()
            .find(|b| b.name() == base_name)
            .ok_or_else(|| unknown(name))?;
        if base == Base::Null && (if_exists || set != SetQualifier::Single) {
            return Err(format!(
                "{name:?} is not a valid condition operator (Null takes no qualifier or IfExists)"
            ));
        }
        Ok(Operator {
            set,
            base,
            if_exists,
        })
    }
}

fn unknown(name: &str) -> String {
    let lower = name.to_lowercase();
    let hint = Base::ALL
        .iter()
        .find(|b| lower.ends_with(&b.name().to_lowercase()))
        .map(|b| {
            format!(
                " (operator names are case-sensitive: did you mean {}?)",
                b.name()
            )
        })
        .unwrap_or_default();
    format!("unknown condition operator {name:?}{hint}")
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.set {
            SetQualifier::Single => {}
            SetQualifier::ForAllValues => f.write_str("ForAllValues:")?,
            SetQualifier::ForAnyValue => f.write_str("ForAnyValue:")?,
        }
        f.write_str(self.base.name())?;
        if self.if_exists {
            f.write_str("IfExists")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operator_names_parse_into_qualifier_base_and_if_exists() {
        let cases = [
            (
                "StringEquals",
                SetQualifier::Single,
                Base::StringEquals,
                false,
            ),
            (
                "ForAllValues:StringEquals",
                SetQualifier::ForAllValues,
                Base::StringEquals,
                false,
            ),
            (
                "ForAnyValue:StringNotLikeIfExists",
                SetQualifier::ForAnyValue,
                Base::StringNotLike,
                true,
            ),
            ("ArnLikeIfExists", SetQualifier::Single, Base::ArnLike, true),
            ("Null", SetQualifier::Single, Base::Null, false),
            (
                "NumericGreaterThanEquals",
                SetQualifier::Single,
                Base::NumericGreaterThanEquals,
                false,
            ),
        ];
        for (name, set, base, if_exists) in cases {
            let op = Operator::parse(name).unwrap();
            assert_eq!(
                (op.set, op.base, op.if_exists),
                (set, base, if_exists),
                "{name}"
            );
            assert_eq!(op.to_string(), name);
        }
    }

    #[test]
    fn bad_operator_names_are_rejected_with_a_hint() {
        assert!(
            Operator::parse("stringequals")
                .unwrap_err()
                .contains("did you mean StringEquals")
        );
        assert!(Operator::parse("StringSorta").is_err());
        assert!(Operator::parse("NullIfExists").is_err());
        assert!(Operator::parse("ForAnyValue:Null").is_err());
    }
}
