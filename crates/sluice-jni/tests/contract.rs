//! Constants the Java side and the native side share, checked against the
//! Java sources so that a change on one side alone fails here.

use std::path::PathBuf;

use sluice_engine::output::checksum::{
    CHECKSUM_ADLER32, CHECKSUM_CRC32, CHECKSUM_CRC32C, CHECKSUM_NONE,
};

/// The source of a class of the plugin, named by its path under
/// `dev/sluice/spark` (`"jni/EngineOp"`).
fn java_source(class: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../spark/src/main/java/dev/sluice/spark")
        .join(format!("{class}.java"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `NAME(code)` constants of a Java enum with explicit codes.
fn enum_codes(source: &str) -> Vec<(String, i32)> {
    source
        .lines()
        .map(str::trim)
        .filter_map(|line| {
            let (name, rest) = line.split_once('(')?;
            let code = rest.strip_suffix("),").or_else(|| rest.strip_suffix(");"))?;
            let name_ok = !name.is_empty()
                && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            Some((name.to_owned(), code.parse().ok()?)).filter(|_| name_ok)
        })
        .collect()
}

/// The text after `=` of `static final <type> NAME = ...;` in a Java
/// source, without the semicolon.
fn java_value<'s>(source: &'s str, name: &str) -> &'s str {
    let decl = format!(" {name} = ");
    let line = source
        .lines()
        .find(|l| l.contains("static final") && l.contains(&decl))
        .unwrap_or_else(|| panic!("{name} declared"));
    line.split(&decl).nth(1).expect("= value").trim().trim_end_matches(';')
}

/// The value of `static final <type> NAME = N << S;` (`N` may carry Java's
/// `L` suffix) in a Java source.
fn java_shift(source: &str, name: &str) -> u64 {
    let value = java_value(source, name);
    let (n, shift) = value.split_once("<<").unwrap_or_else(|| panic!("{name} = N << S"));
    let n: u64 = n.trim().trim_end_matches('L').parse().unwrap_or_else(|e| panic!("{name}: {e}"));
    n << shift.trim().parse::<u32>().unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn checksum_algorithm_codes_agree_with_java() {
    let codes = enum_codes(&java_source("jni/ChecksumAlgorithm"));
    let want = vec![
        ("NONE".to_owned(), CHECKSUM_NONE),
        ("ADLER32".to_owned(), CHECKSUM_ADLER32),
        ("CRC32".to_owned(), CHECKSUM_CRC32),
        ("CRC32C".to_owned(), CHECKSUM_CRC32C),
    ];
    assert_eq!(codes, want);
}

#[test]
fn the_trailer_flag_agrees_with_java() {
    let flag = java_shift(&java_source("jni/SluiceNative"), "FRAME_TRAILER_FLAG");
    assert_eq!(flag as i64, sluice_engine::output::trailer::FRAME_TRAILER_FLAG);
    // The bit is clear in every block's answer: the frame length below 2^32,
    // the uncompressed length (shifted up 32) at most the block limit.
    let max_answer = (sluice_core::format::limits::BLOCK_UNCOMPRESSED_BYTES_MAX as i64) << 32
        | i64::from(u32::MAX);
    assert_eq!(max_answer & sluice_engine::output::trailer::FRAME_TRAILER_FLAG, 0);
}

#[test]
fn the_record_limit_agrees_with_java() {
    let bytes = java_shift(&java_source("api/Limits"), "RECORD_BYTES_MAX");
    assert_eq!(bytes as usize, sluice_core::format::limits::RECORD_BYTES_MAX);
}

/// The `NAME(a, b, c)` entries of a Java enum whose constructor takes ints.
fn enum_rows(source: &str) -> Vec<(String, Vec<i64>)> {
    source
        .lines()
        .map(str::trim)
        .filter_map(|line| {
            let (name, rest) = line.split_once('(')?;
            let args = rest.strip_suffix("),").or_else(|| rest.strip_suffix(");"))?;
            let name_ok = !name.is_empty()
                && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            let values: Option<Vec<i64>> = args.split(',').map(|a| a.trim().parse().ok()).collect();
            Some((name.to_owned(), values?)).filter(|_| name_ok)
        })
        .collect()
}

/// The value of `static final <type> NAME = <integer>;` in a Java source.
fn java_int(source: &str, name: &str) -> i64 {
    let value = java_value(source, name);
    value.parse().unwrap_or_else(|e| panic!("{name} = {value}: {e}"))
}

#[test]
fn lane_codes_widths_and_flags_agree_with_java() {
    use sluice_core::reorg::aggregate::lanes::{
        LaneKind, Lanes, LANES_MAX, LANE_CODE_BITS, OVERFLOW, SEEN,
    };
    let source = java_source("ops/Lane");
    let java = enum_rows(&source);
    let rust = [
        ("COUNT", LaneKind::Count),
        ("SUM64", LaneKind::Sum64),
        ("SUM128", LaneKind::Sum128),
        ("MIN64", LaneKind::Min64),
        ("MAX64", LaneKind::Max64),
    ];
    let want: Vec<(String, Vec<i64>)> = rust
        .iter()
        .map(|(name, k)| {
            let row = vec![i64::from(k.code()), k.input_bytes() as i64, k.words() as i64];
            ((*name).to_owned(), row)
        })
        .collect();
    assert_eq!(java, want, "Lane.java's (code, input bytes, state words) against LaneKind");
    // No lane code the engine takes that Java lacks, and none beyond it.
    for code in 1..(1u32 << LANE_CODE_BITS) {
        let engine = Lanes::from_code(code).is_some();
        let in_java = java.iter().any(|(_, row)| row[0] == i64::from(code));
        assert_eq!(engine, in_java, "lane code {code}: engine {engine}, Java {in_java}");
    }
    assert_eq!(java_int(&source, "CODE_BITS"), i64::from(LANE_CODE_BITS));
    assert_eq!(java_int(&source, "LANES_MAX"), LANES_MAX as i64);
    assert_eq!(java_int(&source, "SEEN"), SEEN as i64);
    assert_eq!(java_int(&source, "OVERFLOW"), OVERFLOW as i64);
}

#[test]
fn aggregate_function_and_value_codes_agree_with_java() {
    use sluice_core::reorg::aggregate::{AggFn, ValueType};
    use sluice_jni::ops::{agg_spec, FUNC_LANES};
    let agg = enum_codes(&java_source("api/Agg"));
    let names: Vec<&str> = agg.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["SUM", "COUNT", "MIN", "MAX"], "Agg.java's functions");
    for (name, code) in &agg {
        let want = match name.as_str() {
            "SUM" => AggFn::Sum,
            "COUNT" => AggFn::Count,
            "MIN" => AggFn::Min,
            _ => AggFn::Max,
        };
        assert_eq!(agg_spec(*code, 0).expect("known code").func, want, "Agg.{name}({code})");
    }
    let op = java_source("ops/OpSpec");
    let exact = i32::try_from(java_int(&op, "CODE_SUM_EXACT")).expect("an int");
    assert_eq!(agg_spec(exact, 0).expect("known code").func, AggFn::SumExact);
    assert_eq!(java_int(&op, "CODE_LANES"), i64::from(FUNC_LANES));
    for (name, want) in [
        ("VALUE_LONG", ValueType::I64),
        ("VALUE_INT", ValueType::I32),
        ("VALUE_DOUBLE", ValueType::F64),
    ] {
        let code = i32::try_from(java_int(&op, name)).expect("an int");
        assert_eq!(agg_spec(0, code).expect("known code").value, want, "OpSpec.{name}");
    }
}

#[test]
fn spill_strategy_codes_agree_with_java() {
    use sluice_core::reorg::aggregate::SpillStrategy;
    use sluice_jni::ops::spill_strategy;
    let java = enum_codes(&java_source("jni/SpillStrategy"));
    let want = [
        ("STATE", SpillStrategy::State),
        ("INPUT", SpillStrategy::Input),
        ("EVICT", SpillStrategy::Evict),
    ];
    assert_eq!(java.len(), want.len(), "SpillStrategy.java: {java:?}");
    for ((name, code), (want_name, want)) in java.iter().zip(want) {
        assert_eq!(name, want_name);
        assert_eq!(spill_strategy(*code).expect("known code"), want, "{name}({code})");
    }
    assert!(spill_strategy(want.len() as i32).is_err(), "a code beyond Java's is refused");
}

#[test]
fn operator_and_codec_codes_agree_with_java() {
    use sluice_core::format::Codec;
    use sluice_jni::ops::{OP_NONE, OP_SORT};
    let op = java_source("jni/EngineOp");
    assert_eq!(java_int(&op, "OP_NONE"), i64::from(OP_NONE));
    assert_eq!(java_int(&op, "OP_SORT"), i64::from(OP_SORT));
    // The fields the native side reads (`HostOp::read`).
    assert!(op.contains("  final int function;"), "EngineOp.function");
    assert!(op.contains("  final int valueType;"), "EngineOp.valueType");
    assert!(op.contains("  final int spill;"), "EngineOp.spill");
    assert!(op.contains("this.spill = spill.code;"), "EngineOp.spill holds a SpillStrategy's code");
    let codecs = enum_codes(&java_source("jni/BlockCodec"));
    let want = [("NONE", Codec::ID_NONE), ("LZ4", Codec::ID_LZ4), ("ZSTD", Codec::ID_ZSTD)];
    assert_eq!(codecs.len(), want.len(), "BlockCodec.java: {codecs:?}");
    for ((name, code), (want_name, id)) in codecs.iter().zip(want) {
        assert_eq!((name.as_str(), *code), (want_name, i32::from(id)), "BlockCodec.{name}");
    }
}

#[test]
fn the_output_format_is_read_as_java_declares_it() {
    use sluice_core::format::Codec;
    use sluice_engine::output::checksum::Algorithm;
    use sluice_jni::format::HostFormat;
    let java = java_source("jni/OutputFormat");
    // The fields the native side reads (`HostFormat::read`), each holding
    // an enum's code.
    for (field, from) in
        [("codec", "codec.code"), ("level", "level"), ("checksum", "checksum.code")]
    {
        assert!(java.contains(&format!("  final int {field};")), "OutputFormat.{field}");
        assert!(java.contains(&format!("this.{field} = {from};")), "OutputFormat.{field}");
    }
    // Every Java code reads back as the codec and algorithm it names.
    let format = |codec, level, checksum| HostFormat { codec, level, checksum };
    let codecs = enum_codes(&java_source("jni/BlockCodec"));
    let want = [Codec::None, Codec::Lz4, Codec::zstd(3).expect("level 3")];
    for ((name, code), want) in codecs.iter().zip(want) {
        let level = if name == "ZSTD" { 3 } else { 0 };
        assert_eq!(format(*code, level, 0).codec().expect(name), want, "{name}");
    }
    let algorithms = enum_codes(&java_source("jni/ChecksumAlgorithm"));
    let want = [None, Some(Algorithm::Adler32), Some(Algorithm::Crc32), Some(Algorithm::Crc32c)];
    for ((name, code), want) in algorithms.iter().zip(want) {
        assert_eq!(format(0, 0, *code).checksum().expect(name), want, "{name}");
    }
    // Codes Java never sends are refused, not taken for a default.
    assert!(format(3, 0, 0).codec().is_err(), "codec 3");
    assert!(format(-1, 0, 0).codec().is_err(), "codec -1");
    assert!(format(2, 99, 0).codec().is_err(), "zstd level 99");
    assert!(format(0, 0, 4).checksum().is_err(), "checksum 4");
}

#[test]
fn the_partition_limit_agrees_with_java() {
    let max = java_shift(&java_source("shuffle/Coverage"), "PARTITIONS_MAX");
    assert_eq!(max as u32, sluice_core::partition::function::PARTITIONS_MAX);
}

#[test]
fn the_record_layout_and_block_header_agree_with_java() {
    // An engine record as the map task writes it: `klen vlen` (u32 LE
    // each), then the key, which starts with the partition id (u32 LE).
    let output = java_source("shuffle/NativeMapOutput");
    assert_eq!(
        java_int(&output, "LENGTHS_BYTES"),
        sluice_core::format::limits::VARIABLE_RECORD_PREFIX_BYTES as i64
    );
    assert_eq!(
        java_int(&output, "PARTITION_KEY_BYTES"),
        sluice_engine::host_keys::PARTITION_KEY_BYTES as i64
    );
    // The reduce side's stream reads each block's header before its body.
    let stream = java_source("shuffle/SluiceBlockInputStream");
    assert_eq!(java_int(&stream, "HEADER_BYTES"), sluice_core::format::header::HEADER_BYTES as i64);
    assert_eq!(
        java_int(&stream, "PAYLOAD_CRC_AT"),
        sluice_core::format::header::PAYLOAD_CRC_AT as i64
    );
}

#[test]
fn the_engine_settings_fields_are_the_ones_read_natively() {
    let java = java_source("jni/EngineSettings");
    let declared: Vec<(String, String)> = java
        .lines()
        .filter_map(|l| l.strip_prefix("  final ")?.strip_suffix(';'))
        .filter_map(|l| l.split_once(' '))
        .map(|(t, n)| (n.to_owned(), t.to_owned()))
        .collect();
    let want: Vec<(String, String)> = sluice_jni::settings::FIELDS
        .iter()
        .map(|(name, sig)| {
            let java_type = match *sig {
                "I" => "int",
                "J" => "long",
                "Z" => "boolean",
                "Ljava/lang/String;" => "String",
                other => panic!("no Java type for {other}"),
            };
            ((*name).to_owned(), java_type.to_owned())
        })
        .collect();
    assert_eq!(declared, want, "EngineSettings.java's fields against settings::FIELDS");
}

#[test]
fn the_row_checksum_rotation_agrees_with_java() {
    let source = java_source("shuffle/RowChecksums");
    let bits = java_value(&source, "SUM_ROTATION_BITS");
    assert_eq!(bits.parse::<u32>(), Ok(sluice_jni::row_checksum::SUM_ROTATION_BITS));
}

/// A native method's name, parameter types and return type, each as the
/// JNI type the entry point takes (`jint`, `JByteArray`, ...; `()` for
/// `void`).
type Native = (String, Vec<String>, String);

/// The JNI type of a Java parameter (`param`) or return type.
fn jni_type(java: &str, param: bool) -> String {
    let t = match (java, param) {
        ("int", _) => "jint",
        ("long", _) => "jlong",
        ("boolean", _) => "jboolean",
        ("void", false) => "()",
        ("byte[]", true) => "JByteArray",
        ("byte[]", false) => "jbyteArray",
        ("long[]", true) => "JLongArray",
        ("long[]", false) => "jlongArray",
        ("int[]", true) => "JIntArray",
        ("int[]", false) => "jintArray",
        ("String", true) => "JString",
        ("ByteBuffer", true) => "JByteBuffer",
        (_, true) => "JObject",
        (other, false) => panic!("no JNI return type for {other}"),
    };
    t.to_owned()
}

/// The `native` methods `jni/<class>.java` declares, sorted by name.
fn java_natives(class: &str) -> Vec<Native> {
    let source = java_source(&format!("jni/{class}"));
    let mut natives: Vec<Native> = source
        .split("static native ")
        .skip(1)
        .map(|decl| {
            let (head, rest) = decl.split_once('(').expect("a parameter list");
            let params = rest.split_once(')').expect("a closed parameter list").0;
            let mut words: Vec<&str> = head.split_whitespace().collect();
            let name = words.pop().expect("a method name").to_owned();
            let ret = jni_type(&words.join(" "), false);
            let params = params
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let ty = p.rsplit_once(char::is_whitespace).expect("a typed parameter").0;
                    jni_type(ty.trim(), true)
                })
                .collect();
            (name, params, ret)
        })
        .collect();
    natives.sort();
    natives
}

/// The JNI entry points the crate defines for `class` (in `src/calls`),
/// sorted by method name: their parameters after the env and the class,
/// lifetimes left out.
fn rust_natives(class: &str) -> Vec<Native> {
    let prefix = format!("pub extern \"system\" fn Java_dev_sluice_spark_jni_{class}_");
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/calls");
    let mut natives = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("src/calls") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("source");
        for decl in text.split(prefix.as_str()).skip(1) {
            let name = decl.split(['<', '(']).next().expect("a name").to_owned();
            let (_, rest) = decl.split_once('(').expect("a parameter list");
            let (params, after) = rest.split_once(')').expect("a closed parameter list");
            let params: Vec<String> = params
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .skip(2)
                .map(|p| {
                    let ty = p.split_once(':').expect("a typed parameter").1.trim();
                    ty.split('<').next().expect("a type").to_owned()
                })
                .collect();
            let head = after.split('{').next().expect("a body");
            let ret = head.split_once("->").map_or("()", |(_, r)| r.trim()).to_owned();
            natives.push((name, params, ret));
        }
    }
    natives.sort();
    natives
}

/// Every native method has one entry point, of its parameters' and return
/// types: JNI links a method by its name alone, so an entry point whose
/// parameters differ from the declaration's would read one argument as
/// another (a number as an object reference: a JVM crash).
#[test]
fn every_java_native_has_one_entry_point_and_no_entry_point_is_unused() {
    let java = java_natives("SluiceNative");
    assert!(java.len() > 20, "{java:?}");
    assert_eq!(java, rust_natives("SluiceNative"));
    let service = java_natives("ServiceNative");
    assert!(service.len() >= 10, "{service:?}");
    assert_eq!(service, rust_natives("ServiceNative"));
}

#[test]
fn the_service_request_codes_agree_with_java() {
    use sluice_jni::calls::service::{END_APPLICATION, REGISTER, RENEW, UNREGISTER};
    let source = java_source("jni/ServiceNative");
    for (name, code) in [
        ("REGISTER", REGISTER),
        ("UNREGISTER", UNREGISTER),
        ("RENEW", RENEW),
        ("END_APPLICATION", END_APPLICATION),
    ] {
        assert_eq!(java_value(&source, name).parse::<i32>(), Ok(code), "{name}");
    }
    // A reduced read's map index, u32::MAX on the wire, is -1 as a Java int.
    let reduced = sluice_service::protocol::REDUCED_MAP;
    assert_eq!(java_value(&source, "REDUCED_MAP").parse::<i32>(), Ok(reduced as i32));
    // A shuffle whose reads would name more winners stays embedded.
    let most = sluice_service::protocol::limits::MAX_WINNERS_PER_READ;
    assert_eq!(java_shift(&source, "MAX_MAPS_PER_READ"), u64::from(most));
}

#[test]
fn the_exception_classes_the_bridge_throws_exist_with_a_message_constructor() {
    use sluice_jni::error::{
        CONNECTION_ENDED, DAEMON_BUSY, DAEMON_REFUSED, REQUEST_REFUSED, SLUICE_EXCEPTION,
        STALE_GENERATION,
    };
    for (class, parent) in [
        (CONNECTION_ENDED, "IOException"),
        (SLUICE_EXCEPTION, "RuntimeException"),
        (DAEMON_REFUSED, "IOException"),
        (STALE_GENERATION, "DaemonRefusedException"),
        (DAEMON_BUSY, "DaemonRefusedException"),
        (REQUEST_REFUSED, "DaemonRefusedException"),
    ] {
        let path = class.strip_prefix("dev/sluice/spark/").expect(class);
        let source = java_source(path);
        let name = path.rsplit('/').next().expect(class);
        assert!(source.contains(&format!("class {name} extends {parent}")), "{class}");
        assert!(source.contains(&format!("public {name}(String message)")), "{class}");
    }
}
