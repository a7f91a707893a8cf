use std::time::Instant;
fn cpu() -> f64 { let mut t = libc_ts{s:0,n:0}; unsafe { clock_gettime(3, &mut t) }; t.s as f64 + t.n as f64 * 1e-9 }
#[repr(C)] struct libc_ts { s: i64, n: i64 }
extern "C" { fn clock_gettime(c: i32, t: *mut libc_ts) -> i32; }
fn main() {
    let n = 165_000usize; let piece = 31_250usize;
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).map(|s| s.parse().unwrap()).unwrap_or(200);
    let mut did = vec![Vec::<u32>::with_capacity(1_000_000), Vec::new()];
    let mut dst_ids: Vec<u32> = vec![0; 1_000_000];
    let mut dst_off: Vec<(usize, usize)> = vec![(0, 0); 1_000_000];
    let mut dst_w: Vec<u32> = vec![0; 1_000_000];
    let mut junk: Vec<u64> = vec![1; 1 << 20]; // 8 MB to flush between rounds
    let mut fw = Vec::new(); let mut bw = Vec::new();
    let _ = did.pop();
    for r in 0..rounds {
        // flush L2 with junk
        let mut s = 0u64; for x in junk.iter_mut() { *x = x.wrapping_add(1); s ^= *x; } std::hint::black_box(s);
        // "engine" writes the segment's rows
        let mut ids: Vec<u32> = Vec::with_capacity(n); let mut off: Vec<(usize, usize)> = Vec::with_capacity(n); let mut w: Vec<u32> = Vec::with_capacity(n);
        for i in 0..n { ids.push(i as u32 * 7); off.push((i * 3, i * 3 + 3)); w.push(i as u32); }
        std::hint::black_box((&ids, &off, &w));
        let back = (r % 2 == 1) ^ (args.get(2).is_some());
        let pieces = n.div_ceil(piece);
        let base = 170_000usize; let start = 500_000usize; let wb = 80_000u32;
        let t0 = cpu(); let _w0 = Instant::now();
        for q in 0..pieces {
            let p = if back { pieces - 1 - q } else { q };
            let (from, to) = (p * piece, ((p + 1) * piece).min(n));
            for (d, s) in dst_ids[base + from..base + to].iter_mut().zip(&ids[from..to]) { *d = *s; }
            for (d, s) in dst_w[base + from..base + to].iter_mut().zip(&w[from..to]) { *d = *s + wb; }
            for (d, &(a, b)) in dst_off[base + from..base + to].iter_mut().zip(&off[from..to]) { *d = (a + start, b + start); }
        }
        let dt = cpu() - t0;
        std::hint::black_box((&dst_ids, &dst_off, &dst_w));
        if back { bw.push(dt) } else { fw.push(dt) }
    }
    fw.sort_by(|a, b| a.partial_cmp(b).unwrap()); bw.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!("forward median {:.3} ms, backward median {:.3} ms (n={} each)", fw[fw.len()/2]*1e3, bw[bw.len()/2]*1e3, fw.len());
}
