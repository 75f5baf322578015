//! Criterion benches of the core kernels, on inputs shaped like real Pulsar traffic.
//! `scripts/bench.sh` runs them with a short measurement time and folds the figures into bench/RESULTS.md.
use arrow_array::BinaryArray;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use prost::Message as _;
use pulsarkit::bulk::{self, EntryColumn};
use pulsarkit::codec::batch::{decode_batch, decode_message_metadata, encode_batch};
use pulsarkit::codec::command::{encode_frame, FrameDecoder, DEFAULT_MAX_FRAME_SIZE};
use pulsarkit::codec::compression::{compress, decompress, Codec, DEFAULT_DECOMPRESSION_LIMIT};
use pulsarkit::codec::crc::crc32c;
use pulsarkit::codec::entry::{add_broker_entry_metadata, parse_layout};
use pulsarkit::codec::metascan::scan_metadata;
use pulsarkit::codec::proto::{
    base_command, BaseCommand, CommandSend, KeyValue, MessageMetadata, SingleMessageMetadata,
};
use std::hint::black_box;
use std::time::Duration;

/// Deterministic pseudo-random bytes (xorshift), so runs compare across machines.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Newline-separated JSON events, like a typical IoT/clickstream topic: compressible but not trivial.
fn json_payload(size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + 200);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut i = 0u64;
    let statuses = ["ok", "warn", "error", "ok", "ok"];
    while out.len() < size {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let line = format!(
            "{{\"id\":{i},\"device\":\"sensor-{:04}\",\"ts\":{},\"temp\":{}.{:02},\"status\":\"{}\",\"tags\":[\"site-{}\",\"rack-{}\"]}}\n",
            (x >> 20) % 5000,
            1_700_000_000_000u64 + i * 17,
            (x >> 40) % 45,
            (x >> 8) % 100,
            statuses[((x >> 50) % 5) as usize],
            (x >> 30) % 12,
            (x >> 33) % 40,
        );
        out.extend_from_slice(line.as_bytes());
        i += 1;
    }
    out.truncate(size);
    out
}

fn metadata(t: usize, seq: u64) -> MessageMetadata {
    MessageMetadata {
        producer_name: format!("standalone-{}-{}", t % 4, 1000 + t),
        sequence_id: seq,
        publish_time: 1_700_000_000_000 + seq,
        properties: vec![
            KeyValue { key: "app".into(), value: "bench-ingest".into() },
            KeyValue { key: "region".into(), value: "eu-west-1".into() },
        ],
        partition_key: Some(format!("d-{t}")),
        event_time: Some(1_700_000_000_000 + seq),
        ..Default::default()
    }
}

/// A stored batch entry: broker entry metadata, checksum, `n` JSON messages with keys and properties.
fn batch_entry(t: usize, seq: u64, n: usize, codec: Codec) -> Vec<u8> {
    let payloads: Vec<Vec<u8>> = (0..n).map(|i| json_payload(60 + (i * 7 + t) % 40)).collect();
    let msgs: Vec<(SingleMessageMetadata, &[u8])> = payloads
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let smm = SingleMessageMetadata {
                partition_key: Some(format!("d-{t}")),
                properties: vec![KeyValue { key: "content-type".into(), value: "application/json".into() }],
                event_time: Some(1_700_000_000_000 + i as u64),
                sequence_id: Some(seq + i as u64),
                ..Default::default()
            };
            (smm, &p[..])
        })
        .collect();
    let e = encode_batch(&metadata(t, seq), &msgs, codec, true).unwrap();
    add_broker_entry_metadata(&e, Some(1_700_000_000_000 + seq), Some(seq + n as u64 - 1)).unwrap()
}

/// `n` entries cycling through 64 templates of 5-20 messages and all codecs, as a BinaryArray.
fn entry_column(n: usize) -> BinaryArray {
    let codecs = [Codec::Zstd, Codec::Lz4, Codec::Snappy, Codec::Zlib, Codec::None];
    let templates: Vec<Vec<u8>> =
        (0..64).map(|t| batch_entry(t, 10_000 + t as u64 * 20, 5 + t % 16, codecs[t % 5])).collect();
    BinaryArray::from_iter_values((0..n).map(|i| templates[i % templates.len()].clone()))
}

fn bench_crc(c: &mut Criterion) {
    let mut g = c.benchmark_group("crc32c");
    for (label, n) in [("64B", 64usize), ("1KiB", 1024), ("64KiB", 64 << 10), ("16MiB", 16 << 20)] {
        let data = noise(n, n as u64);
        g.throughput(Throughput::Bytes(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(label), &data, |b, d| b.iter(|| crc32c(black_box(d))));
    }
    g.finish();
}

fn bench_entry(c: &mut Criterion) {
    let mut g = c.benchmark_group("entry");
    let e = batch_entry(3, 1234, 10, Codec::Zstd);
    g.throughput(Throughput::Bytes(e.len() as u64));
    g.bench_function("parse_layout+verify", |b| {
        b.iter(|| {
            let l = parse_layout(black_box(&e)).unwrap();
            l.verify_checksum(&e).unwrap()
        })
    });
    let l = parse_layout(&e).unwrap();
    let md = &e[l.metadata.clone()];
    g.throughput(Throughput::Elements(1));
    g.bench_function("scan_metadata", |b| b.iter(|| scan_metadata(black_box(md)).unwrap()));
    g.bench_function("prost_decode_metadata", |b| b.iter(|| decode_message_metadata(black_box(md), 0).unwrap()));
    g.finish();

    let mut g = c.benchmark_group("batch");
    let plain = batch_entry(3, 1234, 100, Codec::None);
    let l = parse_layout(&plain).unwrap();
    let body = &plain[l.payload.clone()];
    g.throughput(Throughput::Elements(100));
    g.bench_function("decode_batch/100msgs", |b| b.iter(|| decode_batch(black_box(body), 100).unwrap()));
    g.finish();
}

fn bench_codecs(c: &mut Criterion) {
    let data = json_payload(64 << 10);
    let mut g = c.benchmark_group("decompress_64KiB_json");
    g.throughput(Throughput::Bytes(data.len() as u64));
    for codec in [Codec::Lz4, Codec::Zlib, Codec::Zstd, Codec::Snappy] {
        let z = compress(codec, &data).unwrap();
        assert_eq!(decompress(codec, &z, data.len(), DEFAULT_DECOMPRESSION_LIMIT).unwrap(), data);
        g.bench_with_input(BenchmarkId::from_parameter(codec.name()), &z, |b, z| {
            b.iter(|| decompress(codec, black_box(z), data.len(), DEFAULT_DECOMPRESSION_LIMIT).unwrap())
        });
    }
    g.finish();
    let mut g = c.benchmark_group("compress_64KiB_json");
    g.throughput(Throughput::Bytes(data.len() as u64));
    for codec in [Codec::Lz4, Codec::Zlib, Codec::Zstd, Codec::Snappy] {
        g.bench_function(codec.name(), |b| b.iter(|| compress(codec, black_box(&data)).unwrap()));
    }
    g.finish();
}

fn bench_frames(c: &mut Criterion) {
    // 1000 SEND frames carrying ~1 KiB entries, fed in 64 KiB socket-sized reads.
    let mut stream = Vec::new();
    for i in 0..1000u64 {
        let cmd = BaseCommand {
            r#type: base_command::Type::Send as i32,
            send: Some(CommandSend { producer_id: 1, sequence_id: i, num_messages: Some(10), ..Default::default() }),
            ..Default::default()
        };
        let e = batch_entry((i % 64) as usize, i * 10, 10, Codec::None);
        stream.extend(encode_frame(&cmd.encode_to_vec(), Some(&e)).unwrap());
    }
    let mut g = c.benchmark_group("frame_decoder");
    g.throughput(Throughput::Bytes(stream.len() as u64));
    g.bench_function("1000_send_frames_64KiB_reads", |b| {
        b.iter(|| {
            let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME_SIZE);
            let mut n = 0;
            for chunk in stream.chunks(64 << 10) {
                n += d.feed(black_box(chunk)).unwrap().len();
            }
            assert_eq!(n, 1000);
            n
        })
    });
    g.finish();
}

fn bench_bulk(c: &mut Criterion) {
    const N: usize = 100_000;
    let arr = entry_column(N);
    let col = EntryColumn::from_array(&arr).unwrap();
    let mut g = c.benchmark_group("bulk_100k_entries");
    g.sample_size(10);
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function("verify_checksums", |b| b.iter(|| bulk::verify_checksums(black_box(&col))));
    g.bench_function("peek_broker_entry_metadata", |b| b.iter(|| bulk::peek_broker_entry_metadata(black_box(&col))));
    g.bench_function("strip_broker_entry_metadata", |b| b.iter(|| bulk::strip_broker_entry_metadata(black_box(&col))));
    g.bench_function("decode_metadata", |b| b.iter(|| bulk::decode_metadata(black_box(&col), false).unwrap()));
    g.bench_function("decode_metadata+verify", |b| b.iter(|| bulk::decode_metadata(black_box(&col), true).unwrap()));
    g.finish();

    // Exploding decompresses and copies every message (~12 per entry), so it gets a tenth of the rows.
    let small = arr.slice(0, N / 10);
    let col = EntryColumn::from_array(&small).unwrap();
    let mut g = c.benchmark_group("bulk_10k_entries");
    g.sample_size(10);
    g.throughput(Throughput::Elements((N / 10) as u64));
    g.bench_function("explode_messages", |b| {
        b.iter(|| bulk::explode_messages(black_box(&col), false, true, DEFAULT_DECOMPRESSION_LIMIT).unwrap())
    });
    g.finish();
}

fn config() -> Criterion {
    // Short defaults for a shared 2-core machine; command-line flags still override them.
    Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = kernels;
    config = config();
    targets = bench_crc, bench_entry, bench_codecs, bench_frames, bench_bulk
}
criterion_main!(kernels);
