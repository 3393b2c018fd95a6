//! `--queue-discipline` as text: a name, then the parameters to change from their defaults,
//! `NAME[:KEY=VALUE,...]`, e.g. `fq_codel`, `codel:target=5ms,interval=100ms,ecn`,
//! `pie:target=20ms,ecn=off`, `red:min=30kb,max=90kb,max_p=10%`. Values use the impairment
//! flags' units (durations, sizes, percentages); a bare `ecn` means `ecn=on`.

use super::config::{AqmConfig, CodelParams};
use crate::error::ValueError;
use crate::spec::{parse_duration, parse_percent, parse_size};

/// The keys each discipline takes, for errors.
const KEYS: &str = "codel: target, interval, mtu, ecn; fq_codel: the same and flows, quantum, \
                    memory, drop_batch; pie: target, tupdate, alpha, beta, burst, ecn, \
                    mark_ecn_th, mtu; red: min, max, max_p, wq, mean_packet, ecn";

/// Parses `text` into a discipline with its parameters.
pub fn parse_queue_discipline(text: &str) -> Result<AqmConfig, ValueError> {
    let text = text.trim();
    let (name, params) = match text.split_once(':') {
        Some((n, p)) => (n.trim(), p),
        None => (text, ""),
    };
    let mut cfg = AqmConfig::named(name).map_err(|_| ValueError::UnknownKeyword {
        what: "queue discipline",
        got: name.to_owned(),
        allowed: AqmConfig::NAMES,
    })?;
    for pair in params.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = match pair.split_once('=') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => (pair, "on"),
        };
        set(&mut cfg, key, value).map_err(|e| match e {
            ValueError::Invalid(why) => ValueError::Invalid(format!("{name} {key}: {why}")),
            other => other,
        })?;
    }
    Ok(cfg)
}

fn set(cfg: &mut AqmConfig, key: &str, value: &str) -> Result<(), ValueError> {
    let name = cfg.name();
    let unknown = || {
        ValueError::Invalid(format!(
            "no such parameter for {name}; the parameters are {KEYS}"
        ))
    };
    match cfg {
        AqmConfig::Droptail => Err(ValueError::Invalid(
            "droptail takes no parameters (its limit is --queue)".into(),
        )),
        AqmConfig::Codel(p) => set_codel(p, key, value)?.then_some(()).ok_or_else(unknown),
        AqmConfig::FqCodel(p) => {
            if set_codel(&mut p.codel, key, value)? {
                return Ok(());
            }
            match key {
                "flows" => p.flows = whole(value)?,
                "quantum" => p.quantum = u32::try_from(parse_size(value)?).map_err(|_| big())?,
                "memory" | "memory_limit" => p.memory_limit_bytes = parse_size(value)?,
                "drop_batch" => p.drop_batch = whole(value)?,
                _ => return Err(unknown()),
            }
            Ok(())
        }
        AqmConfig::Pie(p) => {
            match key {
                "target" => p.target_ns = parse_duration(value)?,
                "tupdate" => p.tupdate_ns = parse_duration(value)?,
                "alpha" => p.alpha = number(value)?,
                "beta" => p.beta = number(value)?,
                "burst" | "max_burst" => p.max_burst_ns = parse_duration(value)?,
                "ecn" => p.ecn = switch(value)?,
                "mark_ecn_th" => p.mark_ecn_th = parse_percent(value)?,
                "mtu" => p.mtu_bytes = u32::try_from(parse_size(value)?).map_err(|_| big())?,
                _ => return Err(unknown()),
            }
            Ok(())
        }
        AqmConfig::Red(p) => {
            match key {
                "min" | "min_th" => p.min_th_bytes = parse_size(value)?,
                "max" | "max_th" => p.max_th_bytes = parse_size(value)?,
                "max_p" => p.max_p = parse_percent(value)?,
                "wq" => p.wq = number(value)?,
                "mean_packet" => {
                    p.mean_packet_bytes = u32::try_from(parse_size(value)?).map_err(|_| big())?;
                }
                "ecn" => p.ecn = switch(value)?,
                _ => return Err(unknown()),
            }
            Ok(())
        }
    }
}

/// CoDel's own keys; false if `key` is not one of them.
fn set_codel(p: &mut CodelParams, key: &str, value: &str) -> Result<bool, ValueError> {
    match key {
        "target" => p.target_ns = parse_duration(value)?,
        "interval" => p.interval_ns = parse_duration(value)?,
        "mtu" => p.mtu_bytes = u32::try_from(parse_size(value)?).map_err(|_| big())?,
        "ecn" => p.ecn = switch(value)?,
        _ => return Ok(false),
    }
    Ok(true)
}

fn switch(value: &str) -> Result<bool, ValueError> {
    match value.to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err(ValueError::UnknownKeyword {
            what: "switch",
            got: value.to_owned(),
            allowed: "on or off",
        }),
    }
}

fn number(value: &str) -> Result<f64, ValueError> {
    value
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| ValueError::NotANumber {
            text: value.to_owned(),
            hint: "write a number, e.g. 0.125",
        })
}

fn whole(value: &str) -> Result<u32, ValueError> {
    value.parse::<u32>().map_err(|_| ValueError::NotANumber {
        text: value.to_owned(),
        hint: "write a whole number, e.g. 1024",
    })
}

fn big() -> ValueError {
    ValueError::Invalid("too large".into())
}

/// The text [`parse_queue_discipline`] reads back as `cfg` (every parameter written).
pub fn describe(cfg: &AqmConfig) -> String {
    let ms = |ns: u64| format!("{}ms", ns as f64 / 1e6);
    let on = |b: bool| if b { "on" } else { "off" };
    match cfg {
        AqmConfig::Droptail => "droptail".into(),
        AqmConfig::Codel(p) => format!(
            "codel:target={},interval={},mtu={},ecn={}",
            ms(p.target_ns),
            ms(p.interval_ns),
            p.mtu_bytes,
            on(p.ecn)
        ),
        AqmConfig::FqCodel(p) => format!(
            "fq_codel:target={},interval={},mtu={},ecn={},flows={},quantum={},memory={},drop_batch={}",
            ms(p.codel.target_ns),
            ms(p.codel.interval_ns),
            p.codel.mtu_bytes,
            on(p.codel.ecn),
            p.flows,
            p.quantum,
            p.memory_limit_bytes,
            p.drop_batch
        ),
        AqmConfig::Pie(p) => format!(
            "pie:target={},tupdate={},alpha={},beta={},burst={},ecn={},mark_ecn_th={}%,mtu={}",
            ms(p.target_ns),
            ms(p.tupdate_ns),
            p.alpha,
            p.beta,
            ms(p.max_burst_ns),
            on(p.ecn),
            p.mark_ecn_th * 100.0,
            p.mtu_bytes
        ),
        AqmConfig::Red(p) => format!(
            "red:min={},max={},max_p={}%,wq={},mean_packet={},ecn={}",
            p.min_th_bytes,
            p.max_th_bytes,
            p.max_p * 100.0,
            p.wq,
            p.mean_packet_bytes,
            on(p.ecn)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aqm::config::{FqCodelParams, PieParams, RedParams};

    #[test]
    fn names_alone_give_the_defaults() {
        assert_eq!(
            parse_queue_discipline("codel").unwrap(),
            AqmConfig::named("codel").unwrap()
        );
        assert_eq!(
            parse_queue_discipline(" fq_codel ").unwrap(),
            AqmConfig::FqCodel(FqCodelParams::default())
        );
    }

    #[test]
    fn parameters_are_read_with_their_units() {
        let AqmConfig::Codel(p) =
            parse_queue_discipline("codel:target=10ms,interval=200ms,ecn").unwrap()
        else {
            panic!("codel")
        };
        assert_eq!(
            (p.target_ns, p.interval_ns, p.ecn),
            (10_000_000, 200_000_000, true)
        );
        let AqmConfig::FqCodel(p) =
            parse_queue_discipline("fq_codel:quantum=300,flows=64,memory=4mb,ecn=off").unwrap()
        else {
            panic!("fq_codel")
        };
        assert_eq!(
            (p.quantum, p.flows, p.memory_limit_bytes, p.codel.ecn),
            (300, 64, 4 << 20, false)
        );
        let AqmConfig::Red(p) = parse_queue_discipline("red:min=20kb,max=60kb,max_p=5%").unwrap()
        else {
            panic!("red")
        };
        assert_eq!((p.min_th_bytes, p.max_th_bytes), (20 << 10, 60 << 10));
        assert!((p.max_p - 0.05).abs() < 1e-12);
    }

    #[test]
    fn every_description_reads_back_as_itself() {
        for cfg in [
            AqmConfig::Droptail,
            AqmConfig::named("codel").unwrap(),
            AqmConfig::FqCodel(FqCodelParams::default()),
            AqmConfig::Pie(PieParams {
                ecn: true,
                ..PieParams::default()
            }),
            AqmConfig::Red(RedParams::default()),
        ] {
            let text = describe(&cfg);
            assert_eq!(parse_queue_discipline(&text).unwrap(), cfg, "{text}");
        }
    }

    #[test]
    fn mistakes_are_named_with_the_fix() {
        let e = parse_queue_discipline("cake").unwrap_err().to_string();
        assert!(e.contains("cake") && e.contains("fq_codel"), "{e}");
        let e = parse_queue_discipline("codel:quantum=1514")
            .unwrap_err()
            .to_string();
        assert!(e.contains("codel quantum") && e.contains("interval"), "{e}");
        let e = parse_queue_discipline("droptail:ecn")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--queue"), "{e}");
        let e = parse_queue_discipline("pie:ecn=maybe")
            .unwrap_err()
            .to_string();
        assert!(e.contains("on or off"), "{e}");
        let e = parse_queue_discipline("codel:target=5parsecs")
            .unwrap_err()
            .to_string();
        assert!(e.contains("parsecs"), "{e}");
    }
}
