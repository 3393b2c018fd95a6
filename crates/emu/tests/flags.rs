//! Flags to LinkConfig: what is accepted, and the exact messages for what is not.

use tcplab_emu::{
    ConfigError, DirectionConfig, Distribution, ImpairmentFlags, Jitter, LinkConfig, Loss,
    QueueLimit, Reorder,
};

fn flags(pairs: &[(&str, &str)]) -> ImpairmentFlags {
    let mut f = ImpairmentFlags::default();
    for &(k, v) in pairs {
        let name = k.trim_start_matches("--").replace('-', "_");
        let slot = f
            .field_mut(&name)
            .unwrap_or_else(|| panic!("unknown flag {k}"));
        *slot = Some(v.to_owned());
    }
    f
}

fn error(pairs: &[(&str, &str)]) -> String {
    flags(pairs)
        .to_link_config()
        .expect_err("flags should be rejected")
        .to_string()
}

#[test]
fn no_flags_is_transparent() {
    let cfg = ImpairmentFlags::default().to_link_config().unwrap();
    assert_eq!(cfg, LinkConfig::default());
    assert!(cfg.is_transparent());
}

#[test]
fn every_flag_lands_in_the_right_field() {
    let cfg = flags(&[
        ("--delay", "10ms/2ms"),
        ("--jitter", "1ms"),
        ("--jitter-dist", "normal"),
        ("--correlation", "25%"),
        ("--loss", "0.1%"),
        ("--rate", "1gbit/100mbit"),
        ("--queue", "1000/64kb"),
        ("--overhead", "24"),
        ("--reorder", "1%,gap:5"),
        ("--duplicate", "0.5%"),
        ("--corrupt", "0.01%"),
        ("--seed", "0x5eed"),
    ])
    .to_link_config()
    .unwrap();
    let jitter = Jitter {
        amount_ns: 1_000_000,
        distribution: Distribution::Normal,
        correlation: 0.25,
        allow_reorder: false,
    };
    let expected_fwd = DirectionConfig {
        delay_ns: 10_000_000,
        jitter: Some(jitter),
        loss: Some(Loss::Bernoulli { probability: 0.001 }),
        rate_bps: Some(1_000_000_000),
        queue: Some(QueueLimit::Packets(1000)),
        overhead_bytes: 24,
        reorder: Some(Reorder {
            probability: 0.01,
            gap: 5,
        }),
        duplicate: 0.005,
        corrupt: 0.0001,
        queue_discipline: None,
    };
    assert_eq!(cfg.seed, Some(0x5eed));
    assert_eq!(cfg.forward, expected_fwd);
    assert_eq!(cfg.reverse.delay_ns, 2_000_000);
    assert_eq!(cfg.reverse.rate_bps, Some(100_000_000));
    assert_eq!(cfg.reverse.queue, Some(QueueLimit::Bytes(65_536)));
    assert!(cfg.forward.may_reorder());
}

#[test]
fn gilbert_elliott_with_netem_defaults() {
    let cfg = flags(&[("--loss-model", "ge:1%")])
        .to_link_config()
        .unwrap();
    assert_eq!(
        cfg.forward.loss,
        Some(Loss::GilbertElliott {
            p: 0.01,
            r: 0.99,
            one_minus_h: 1.0,
            one_minus_k: 0.0
        })
    );
    let cfg = flags(&[
        ("--loss-model", "ge:1%,10%,70%,0.1%/bernoulli"),
        ("--loss", "0/2%"),
    ])
    .to_link_config();
    assert_eq!(
        cfg.unwrap_err().to_string(),
        "--loss and --loss-model conflict: --loss sets Bernoulli loss; for Gilbert-Elliott or a pattern give only --loss-model"
    );
    let cfg = flags(&[("--loss-model", "ge:1%,10%,70%,0.1%/bits:0001")])
        .to_link_config()
        .unwrap();
    assert!(matches!(
        cfg.forward.loss,
        Some(Loss::GilbertElliott { .. })
    ));
    assert!(matches!(&cfg.reverse.loss, Some(Loss::Pattern(p)) if p.period() == 4));
}

#[test]
fn files_are_read_through_the_callers_reader() {
    let read = |path: &str| -> Result<String, String> {
        match path {
            "/etc/tc/x.dist" => Ok("-8192 8192\n".into()),
            "/tmp/stall/41.pat" => Ok("period 41\ndrop 41\n".into()),
            other => Err(format!("{other}: No such file or directory")),
        }
    };
    let cfg = flags(&[
        ("--jitter", "1ms"),
        ("--jitter-dist", "table:/etc/tc/x.dist/normal"),
        ("--loss-model", "pattern:/tmp/stall/41.pat"),
    ])
    .to_link_config_with(&read)
    .unwrap();
    let Some(Jitter {
        distribution: Distribution::Table(t),
        ..
    }) = &cfg.forward.jitter
    else {
        panic!("forward jitter should be a table: {:?}", cfg.forward.jitter);
    };
    assert_eq!(t.values(), &[-8192, 8192]);
    assert_eq!(
        cfg.reverse.jitter.as_ref().map(|j| &j.distribution),
        Some(&Distribution::Normal)
    );
    assert!(matches!(&cfg.reverse.loss, Some(Loss::Pattern(p)) if p.period() == 41));

    let e = flags(&[("--loss-model", "pattern:/nope.pat")]).to_link_config_with(&read);
    assert_eq!(
        e.unwrap_err().to_string(),
        "--loss-model: cannot read `/nope.pat`: /nope.pat: No such file or directory; check the path"
    );
    let e = flags(&[("--jitter", "1ms"), ("--jitter-dist", "table:x.dist")]).to_link_config();
    assert!(matches!(
        e,
        Err(ConfigError::File {
            flag: "--jitter-dist",
            ..
        })
    ));
}

#[test]
fn out_of_range_values_name_the_flag_and_the_fix() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[("--loss", "120%")],
            "--loss 120%: loss must be between 0% and 100%",
        ),
        (
            &[("--loss", "1%/120%")],
            "--loss 120%: loss must be between 0% and 100%",
        ),
        (
            &[("--delay", "61s")],
            "--delay 61s: delay must be at most 60s",
        ),
        (
            &[("--delay", "10")],
            "--delay 10: missing unit: write e.g. 10ms, 250us, 1.5s or 0",
        ),
        (
            &[("--delay", "-5ms")],
            "--delay -5ms: `-5ms` is negative: values cannot be negative (write e.g. 10ms, 250us, 1.5s or 0)",
        ),
        (
            &[("--rate", "0bit")],
            "--rate 0bit: rate must be more than 0 and at most 400gbit",
        ),
        (
            &[("--rate", "401gbit")],
            "--rate 401gbit: rate must be more than 0 and at most 400gbit",
        ),
        (
            &[("--rate", "1gbit"), ("--queue", "1000b")],
            "--queue 1000b: queue must be at least 1514b (one MTU-sized frame) and at most 4gb",
        ),
        (
            &[("--rate", "1gbit"), ("--queue", "0")],
            "--queue 0: queue must be between 1 and 10000000 packets",
        ),
        (
            &[("--queue", "100")],
            "--queue needs --rate: a queue, its discipline and an overhead belong to a rate limit: add e.g. --rate 1gbit",
        ),
        (
            &[("--jitter", "1ms"), ("--correlation", "100%")],
            "--correlation 100%: correlation must be at least 0% and below 100%",
        ),
        (
            &[("--jitter-dist", "normal")],
            "--jitter-dist needs --jitter: it shapes the jitter: add e.g. --jitter 2ms",
        ),
        (
            &[("--jitter", "1ms"), ("--jitter-dist", "gaussian")],
            "--jitter-dist gaussian: unknown distribution `gaussian`: use uniform, normal, pareto, paretonormal or table:FILE",
        ),
        (
            &[("--loss-model", "ge:1%,10%,170%")],
            "--loss-model ge:1%,10%,170%: 1-h must be between 0% and 100%",
        ),
        (
            &[("--duplicate", "101%")],
            "--duplicate 101%: duplicate must be between 0% and 100%",
        ),
        (
            &[("--reorder", "gap:x")],
            "--reorder gap:x: `x` is not a number: write gap:N with a whole number, e.g. gap:5",
        ),
        (
            &[("--delay", "1ms/2ms/3ms")],
            "--delay 1ms/2ms/3ms: `1ms/2ms/3ms` has more than one `/`: write A/B (client→server/server→client)",
        ),
        (
            &[("--seed", "abc")],
            "--seed abc: `abc` is not a number: write an integer from 0 to 18446744073709551615, or hex like 0x5eed",
        ),
    ];
    for (pairs, expected) in cases {
        assert_eq!(&error(pairs), expected, "flags {pairs:?}");
    }
}

#[test]
fn accepted_edge_values() {
    let cfg = flags(&[
        ("--delay", "60s"),
        ("--loss", "100%"),
        ("--rate", "400gbit"),
        ("--queue", "1514b"),
    ])
    .to_link_config()
    .unwrap();
    assert_eq!(cfg.forward.delay_ns, 60_000_000_000);
    assert_eq!(cfg.forward.queue, Some(QueueLimit::Bytes(1514)));
    let cfg = flags(&[("--delay", "0"), ("--loss", "0")])
        .to_link_config()
        .unwrap();
    assert!(cfg.is_transparent());
    let cfg = flags(&[("--jitter", "2ms"), ("--reorder", "jitter")])
        .to_link_config()
        .unwrap();
    assert!(cfg.forward.may_reorder());
    assert!(cfg.forward.reorder.is_none());
}

#[test]
fn config_round_trips_through_json_and_toml() {
    let cfg = flags(&[
        ("--delay", "10ms/2ms"),
        ("--jitter", "1ms"),
        ("--jitter-dist", "pareto"),
        ("--loss-model", "ge:1%,10%,70%,0.1%/bits:01"),
        ("--rate", "1gbit"),
        ("--queue", "64kb"),
        ("--seed", "7"),
    ])
    .to_link_config()
    .unwrap();
    let json = serde_json::to_string(&cfg).unwrap();
    assert_eq!(serde_json::from_str::<LinkConfig>(&json).unwrap(), cfg);
    let text = toml::to_string(&cfg).unwrap();
    assert_eq!(toml::from_str::<LinkConfig>(&text).unwrap(), cfg);

    let e = toml::from_str::<LinkConfig>("[forward]\ndelay_ms = 5\n").unwrap_err();
    assert!(e.to_string().contains("unknown field `delay_ms`"), "{e}");
    let bad: LinkConfig = toml::from_str("[reverse]\nduplicate = 1.5\n").unwrap();
    assert_eq!(
        bad.validate().unwrap_err().to_string(),
        "reverse.duplicate: duplicate must be between 0% and 100%"
    );
}

/// The one field list: every field's serde key, `FIELDS` entry and `--flag` agree, and the
/// by-name accessors reach each field.
#[test]
fn the_field_list_is_the_serde_form() {
    let mut all = ImpairmentFlags::default();
    for (i, name) in ImpairmentFlags::FIELDS.iter().enumerate() {
        *all.field_mut(name).expect(name) = Some(format!("v{i}"));
    }
    let json = serde_json::to_value(&all).unwrap();
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut want = ImpairmentFlags::FIELDS.to_vec();
    want.sort_unstable();
    assert_eq!(keys, want, "serde_json sorts its keys");
    let text = toml::to_string(&all).unwrap();
    assert_eq!(toml::from_str::<ImpairmentFlags>(&text).unwrap(), all);
    let pairs = all.pairs();
    assert_eq!(pairs.len(), ImpairmentFlags::FIELDS.len());
    for (i, (name, value)) in pairs.into_iter().enumerate() {
        assert_eq!(value, format!("v{i}"), "{name}");
    }
    assert_eq!(ImpairmentFlags::flag("jitter_dist"), "--jitter-dist");
    assert!(ImpairmentFlags::default().is_empty() && !all.is_empty());
    assert_eq!(ImpairmentFlags::default().field_mut("dealy"), None);
    let e = toml::from_str::<ImpairmentFlags>("dealy = \"1ms\"\n").unwrap_err();
    assert!(e.to_string().contains("unknown field `dealy`"), "{e}");
}

/// `check_each` refuses a value that does not parse, naming its field and flag, for every
/// field; it leaves combinations (a queue without a rate) to `to_link_config`.
#[test]
fn each_value_is_checked_alone_naming_its_field() {
    for name in ImpairmentFlags::FIELDS {
        let mut f = ImpairmentFlags::default();
        *f.field_mut(name).unwrap() = Some("?x".into());
        let (field, e) = f.check_each(&|_| Err("no files".into())).unwrap_err();
        assert_eq!(field, *name);
        assert!(
            e.to_string().starts_with(&ImpairmentFlags::flag(name)),
            "{name}: {e}"
        );
    }
    let queue_alone = flags(&[("--queue", "100"), ("--jitter-dist", "normal")]);
    assert_eq!(queue_alone.check_each(&|_| Err("no files".into())), Ok(()));
    assert!(queue_alone.to_link_config().is_err());
}

#[test]
fn overlay_replaces_only_what_the_top_sets() {
    let mut base = flags(&[("--delay", "10ms"), ("--rate", "1gbit")]);
    base.overlay(&flags(&[("--delay", "20ms"), ("--loss", "1%")]));
    assert_eq!(
        base.pairs(),
        [("delay", "20ms"), ("loss", "1%"), ("rate", "1gbit")]
    );
}
