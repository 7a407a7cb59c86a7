//! Disruption budget schedules: 5-field cron expressions or macros, evaluated in UTC, parsed the
//! way upstream parses them (robfig/cron's standard parser).

pub use croner::Cron;

/// Parses a budget schedule. `@midnight` is an alias of `@daily`, as in robfig/cron.
pub fn parse_schedule(schedule: &str) -> Result<Cron, String> {
    let trimmed = schedule.trim();
    let expr = match trimmed {
        "@annually" | "@yearly" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        other if other.starts_with('@') => {
            return Err(format!(
                "unknown schedule macro {other:?} (expected @annually, @yearly, @monthly, @weekly, @daily, @midnight or @hourly)"
            ));
        }
        other => other,
    };
    let fields = expr.split_whitespace().count();
    if fields != 5 {
        return Err(format!(
            "a cron schedule has 5 fields (minute hour day-of-month month day-of-week), found {fields}"
        ));
    }
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| format!("invalid cron schedule {schedule:?}: {e}"))
}
