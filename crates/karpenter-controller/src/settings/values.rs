//! The enumerated and boolean setting values, with their accepted spellings.
//!
//! Each parser returns an error that lists what is allowed; the settings
//! module adds the flag and env names. Spellings follow upstream exactly
//! (case-sensitive enums, Go's `strconv.ParseBool` for booleans).

use std::fmt;
use std::str::FromStr;

/// Go's `strconv.ParseBool`: what upstream accepts for boolean flags and env.
pub fn parse_go_bool(input: &str) -> Result<bool, String> {
    match input {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!(
            "{input:?} is not a boolean; allowed: true, false (or 1, t, T, TRUE, True, 0, f, F, FALSE, False)"
        )),
    }
}

macro_rules! setting_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            /// Every accepted spelling, in order.
            pub const ALLOWED: &'static [&'static str] = &[$($text),+];

            /// The spelling of this value.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }
        }

        impl FromStr for $name {
            type Err = String;
            fn from_str(input: &str) -> Result<Self, String> {
                match input {
                    $($text => Ok(Self::$variant),)+
                    _ => Err(format!("{input:?} is not allowed; allowed: {}", Self::ALLOWED.join(", "))),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

setting_enum! {
    /// `LOG_LEVEL`: upstream's three levels.
    LogLevel {
        /// Everything, including per-decision detail.
        Debug => "debug",
        /// Normal operation (default).
        Info => "info",
        /// Errors only.
        Error => "error",
    }
}

setting_enum! {
    /// `PREFERENCE_POLICY`: whether preferred affinities and ScheduleAnyway spreads are honoured.
    PreferencePolicy {
        /// Treat preferences as requirements, relaxing them when they cannot be met (default).
        Respect => "Respect",
        /// Ignore preferences when scheduling.
        Ignore => "Ignore",
    }
}

setting_enum! {
    /// `MIN_VALUES_POLICY`: what to do when a NodePool's `minValues` cannot be met.
    MinValuesPolicy {
        /// Fail the launch (default).
        Strict => "Strict",
        /// Relax `minValues` as far as needed and record it.
        BestEffort => "BestEffort",
    }
}

setting_enum! {
    /// `CLOUD_PROVIDER` (karpenter-rs only): which cloud the controller launches into.
    CloudProviderKind {
        /// Simulated nodes, like upstream's KWOK provider (default).
        Kwok => "kwok",
        /// AWS EC2.
        Aws => "aws",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_booleans_accept_exactly_strconv_parse_bool_spellings() {
        for (input, expected) in [
            ("1", true),
            ("t", true),
            ("T", true),
            ("true", true),
            ("TRUE", true),
            ("True", true),
            ("0", false),
            ("f", false),
            ("F", false),
            ("false", false),
            ("FALSE", false),
            ("False", false),
        ] {
            assert_eq!(parse_go_bool(input), Ok(expected), "{input}");
        }
        for input in ["yes", "no", "tRuE", "", "2"] {
            assert!(parse_go_bool(input).is_err(), "{input}");
        }
    }

    #[test]
    fn enum_settings_parse_their_exact_spellings_and_list_them_on_error() {
        assert_eq!("debug".parse(), Ok(LogLevel::Debug));
        assert_eq!("error".parse(), Ok(LogLevel::Error));
        assert_eq!("Ignore".parse(), Ok(PreferencePolicy::Ignore));
        assert_eq!("BestEffort".parse(), Ok(MinValuesPolicy::BestEffort));
        assert_eq!("aws".parse(), Ok(CloudProviderKind::Aws));
        let cases: [(Result<(), String>, &str); 4] = [
            (
                "warn".parse::<LogLevel>().map(drop),
                "allowed: debug, info, error",
            ),
            (
                "respect".parse::<PreferencePolicy>().map(drop),
                "allowed: Respect, Ignore",
            ),
            (
                "strict".parse::<MinValuesPolicy>().map(drop),
                "allowed: Strict, BestEffort",
            ),
            (
                "gcp".parse::<CloudProviderKind>().map(drop),
                "allowed: kwok, aws",
            ),
        ];
        for (result, expected) in cases {
            let err = result.expect_err(expected);
            assert!(err.contains(expected), "{err}");
        }
    }
}
