//! What an HLO instruction costs, from its HLO alone: floating-point operations and
//! the bytes it reads and writes — for the captures whose ops carry no `flops` /
//! `bytes_accessed` stats (XLA:CPU, NVIDIA, AMD; TPU profiles carry their own).
//!
//! - `dot`: 2 × the output's elements × the product of the contracting dimensions;
//!   a library GEMM custom call (`__cublas$gemm`, `__cublas$lt$matmul`, hipBLASLt) the
//!   same, from the dimension numbers in its backend config.
//! - cuDNN's fused attention (`__cudnn$fmhaSoftmax`, `…Backward`): its matrix
//!   products, Q·Kᵀ and P·V, each 2 × B·H·Sq·Skv (the scores' shape, in its backend
//!   config) × the head size; the backward five products (FlashAttention-2's count,
//!   2.5× the forward); with a causal mask half of that, the masked blocks being
//!   skipped. Its bytes leave out the workspace (a trailing `u8` output).
//! - `convolution`: 2 × the output's elements × the kernel's spatial size × its input
//!   features (feature groups already shrink the kernel's input features).
//! - elementwise arithmetic: one FLOP per output element; transcendental functions
//!   (`exponential`, `log`, `tanh`, `rsqrt`, …) are counted apart, not as FLOPs.
//! - `reduce`: one FLOP per input element folded in (input less output elements) per
//!   operation of its reducer. A `reduce-scatter` the same (its operands hold the
//!   participants' values, n × its result); an `all-reduce` once per element of its
//!   result (XLA's count: its shapes do not say how many take part).
//! - data movement (`copy`, `transpose`, `broadcast`, `reshape`, `slice`, `gather`, …):
//!   no FLOPs.
//!   Its bytes leave out the GEMM's workspace (the second element of its output).
//! - `fusion`: the sum of its body's FLOPs, each instruction's for the share of its
//!   result the fusion uses (a subtract whose result is gathered from computes what
//!   the gather takes); its bytes are what it reads and writes —
//!   its operands and its output — not its body's intermediates. Of an operand that
//!   its body only slices or gathers from (directly or through elementwise ops), it
//!   reads the part taken.
//! - any other instruction: its operands' and its output's bytes.

use serde_json::Value;
use stepscope_xspace::hlo::{HloComputation, HloInstruction, HloModule, Shape, WindowDim};

/// True when `i` multiplies matrices: a dot, a convolution, a GEMM or convolution
/// library call, or a fusion holding one (at any depth: a Triton GEMM fusion holds
/// its dot in a nested fusion).
pub fn is_matrix(m: &HloModule, i: &HloInstruction) -> bool {
    matrix_instruction(m, i).is_some()
}

/// The instruction of `i` that multiplies matrices: `i` itself, or the first in its
/// fused body, nested fusions searched too (depth first, in order). Each fused body is
/// searched once: in a damaged module whose fusions call themselves or each other, the
/// walk ends.
pub fn matrix_instruction<'m>(m: &'m HloModule, i: &'m HloInstruction) -> Option<&'m HloInstruction> {
    if multiplies_matrices(i) {
        return Some(i);
    }
    let body = m.fused_body(i)?;
    let mut seen = vec![body.id];
    let mut stack = vec![body.instructions.iter()];
    while let Some(top) = stack.last_mut() {
        let Some(x) = top.next() else {
            stack.pop();
            continue;
        };
        if multiplies_matrices(x) {
            return Some(x);
        }
        if let Some(inner) = m.fused_body(x).filter(|b| !seen.contains(&b.id)) {
            seen.push(inner.id);
            stack.push(inner.instructions.iter());
        }
    }
    None
}

/// A dot, a convolution, or a GEMM, convolution or fused-attention library call.
fn multiplies_matrices(i: &HloInstruction) -> bool {
    matches!(i.opcode.as_str(), "dot" | "convolution") || (i.opcode == "custom-call" && is_library_matrix(i))
}

/// A library call that multiplies matrices: a GEMM, a convolution, fused attention.
fn is_library_matrix(i: &HloInstruction) -> bool {
    let t = &i.custom_call_target;
    is_gemm(t) || is_conv(t) || is_fmha(t)
}

/// Whether `i` can run on tensor (matrix) cores — HMMA/wgmma on NVIDIA, MFMA on AMD:
/// it multiplies matrices ([`is_matrix`]), its matrix instruction's inputs are of a type
/// they take (f16, bf16, 8-bit floats; f32 as TF32, XLA's default precision on the GPUs
/// that have them), and its matrix sizes — a dot's or GEMM's contracting size and its
/// output's last two dimensions, a convolution's input and output features — are
/// multiples of 8 (16 for 8-bit floats), which the libraries' and Triton's MMA tiles
/// need without padding. None for an op that multiplies no matrices.
pub fn tensor_core_eligible(m: &HloModule, i: &HloInstruction) -> Option<bool> {
    let hero = matrix_instruction(m, i)?;
    let operand = |k: usize| hero.operand_ids.get(k).and_then(|&id| m.instruction_by_id(id)).map(|(_, o)| &o.shape);
    let lhs = operand(0)?;
    let ty = lhs.element_type;
    // PrimitiveType: 10 f16, 16 bf16, 11 f32, 19/20/23/24/25 8-bit floats.
    let align = match ty {
        10 | 16 | 11 => 8,
        19 | 20 | 23 | 24 | 25 => 16,
        _ => return Some(false),
    };
    let dim = |s: &Shape, d: i64| usize::try_from(d).ok().and_then(|d| s.dims.get(d)).copied().unwrap_or(1);
    let out = first_output(&hero.shape);
    let sizes: Vec<i64> = if is_fmha(&hero.custom_call_target) {
        // The head size, the contracting size of both products.
        vec![*lhs.dims.last()?]
    } else if let Some(c) = hero.conv.as_ref().filter(|_| hero.opcode != "dot") {
        let kernel = operand(1)?;
        vec![dim(kernel, c.kernel_input_feature), dim(kernel, c.kernel_output_feature)]
    } else {
        let contracting = match &hero.dot {
            Some(d) => d.lhs_contracting.clone(),
            None => gemm_contracting(&hero.backend_config)?,
        };
        let k: i64 = contracting.iter().map(|&d| dim(lhs, d)).product();
        let n = out.dims.len();
        let mut v = vec![k];
        v.extend(out.dims.iter().skip(n.saturating_sub(2)));
        v
    };
    Some(sizes.iter().all(|&x| x > 0 && x % align == 0))
}

/// FLOPs, transcendental operations and bytes of one execution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Cost {
    pub flops: u64,
    pub transcendentals: u64,
    pub bytes: u64,
    /// A collective whose HLO names its groups: the bytes one participant sends
    /// ([`collective_bytes`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collective_bytes: Option<u64>,
}

const ELEMENTWISE: &[&str] = &[
    "add",
    "subtract",
    "multiply",
    "divide",
    "maximum",
    "minimum",
    "negate",
    "abs",
    "compare",
    "select",
    "and",
    "or",
    "xor",
    "not",
    "sign",
    "floor",
    "ceil",
    "round-nearest-afz",
    "round-nearest-even",
    "remainder",
    "clamp",
    "convert",
    "shift-left",
    "shift-right-logical",
    "shift-right-arithmetic",
    "is-finite",
    "real",
    "imag",
    "complex",
];

const TRANSCENDENTAL: &[&str] = &[
    "exponential",
    "exponential-minus-one",
    "log",
    "log-plus-one",
    "tanh",
    "rsqrt",
    "sqrt",
    "cbrt",
    "power",
    "sine",
    "cosine",
    "tan",
    "logistic",
    "atan2",
    "erf",
];

/// The bytes one participant of collective `i` sends over the interconnect in one
/// execution, by the convention of bus bandwidth (NCCL's tests): with `n` participants
/// per group and `S` the bytes of its operands, an all-reduce moves 2(n−1)/n × S (a
/// reduce-scatter then an all-gather), a reduce-scatter and an all-to-all (n−1)/n × S,
/// an all-gather (n−1) × S (its output is n × S), a collective-permute S. `n` is the
/// size of the instruction's replica groups; where it names none every device takes
/// part, and `devices` (the devices that ran it) is used. None for an instruction that
/// is no collective.
pub fn collective_bytes(m: &HloModule, i: &HloInstruction, devices: i64) -> Option<u64> {
    CollectiveShape::of(m, i)?.bytes(devices)
}

/// What [`collective_bytes`] reads of a collective's instruction: its kind, its
/// operands' bytes and its groups, kept where its module is not (a run read a host at
/// a time counts the bytes once every host's devices are known).
#[derive(Clone, Debug, PartialEq)]
pub struct CollectiveShape {
    op: &'static str,
    operand_bytes: u64,
    group_size: i64,
}
stepscope_model::wire_struct!(CollectiveShape { op, operand_bytes, group_size });

impl CollectiveShape {
    /// The shape of collective `i` of `m`; `None` for an instruction that is no
    /// collective whose bytes are counted.
    pub fn of(m: &HloModule, i: &HloInstruction) -> Option<CollectiveShape> {
        let op = i.opcode.strip_suffix("-start").unwrap_or(&i.opcode);
        let op = match op {
            "collective-permute" if i.source_target_pairs > 0 => "collective-permute",
            "all-reduce" => "all-reduce",
            "reduce-scatter" => "reduce-scatter",
            "all-to-all" => "all-to-all",
            "ragged-all-to-all" => "ragged-all-to-all",
            "all-gather" => "all-gather",
            _ => return None,
        };
        let operand_bytes = m.operands(i).map(|o| o.shape.bytes_size()).fold(0u64, u64::saturating_add);
        Some(CollectiveShape { op, operand_bytes, group_size: i.group_size })
    }

    /// Its bytes in one execution where `devices` ran it (used where the instruction
    /// names no groups); `None` where no group size is known.
    pub fn bytes(&self, devices: i64) -> Option<u64> {
        let s = self.operand_bytes as f64;
        let group = if self.group_size > 0 { self.group_size } else { devices };
        let n = group as f64;
        let moved = match self.op {
            "collective-permute" => s,
            _ if group < 1 => return None,
            "all-reduce" => 2.0 * (n - 1.0) / n * s,
            "all-gather" => (n - 1.0) * s,
            _ => (n - 1.0) / n * s,
        };
        Some(moved.round() as u64)
    }
}

/// The cost of one execution of `i` in module `m`.
pub fn cost(m: &HloModule, i: &HloInstruction) -> Cost {
    let body = m.fused_body(i);
    let mut memo = Vec::new();
    let operand_bytes: u64 = m
        .operands(i)
        .enumerate()
        .map(|(k, o)| {
            let full = o.shape.bytes_size();
            let param = body.and_then(|b| {
                b.instructions
                    .iter()
                    .find(|p| p.opcode == "parameter" && p.parameter_number == k as i64)
                    .map(|p| (b, p))
            });
            param.map_or(full, |(b, p)| (full as f64 * utilization(b, p, &mut memo, 0)).round() as u64)
        })
        .fold(0u64, u64::saturating_add);
    // A library GEMM or convolution returns (result, workspace): the workspace is the
    // library's scratch, not data the op reads or writes. A fusion that updates a slice
    // of a buffer in place writes the slice.
    let output = match body {
        _ if i.opcode == "custom-call" && is_fmha(&i.custom_call_target) && i.shape.is_tuple() => {
            // (outputs…, workspace): the workspace is the trailing u8 buffer.
            let n = i.shape.tuple.len();
            let scratch = i.shape.tuple.last().is_some_and(|s| s.element_type == U8);
            i.shape.tuple[..n - usize::from(scratch)].iter().map(Shape::bytes_size).fold(0u64, u64::saturating_add)
        }
        _ if i.opcode == "custom-call" && is_library_matrix(i) => first_output(&i.shape).bytes_size(),
        Some(b) => written_bytes(b),
        None => i.shape.bytes_size(),
    };
    let bytes = operand_bytes.saturating_add(output);
    if let Some(body) = body {
        let mut c = Cost { bytes, ..Cost::default() };
        for f in &body.instructions {
            let inner = compute(m, f);
            if inner.flops == 0 && inner.transcendentals == 0 {
                continue;
            }
            // Only the elements of its result that the fusion uses are computed.
            let used = utilization(body, f, &mut memo, 0);
            let scale = |n: u64| (n as f64 * used).round() as u64;
            c.flops = c.flops.saturating_add(scale(inner.flops));
            c.transcendentals = c.transcendentals.saturating_add(scale(inner.transcendentals));
        }
        return c;
    }
    Cost { bytes, collective_bytes: collective_bytes(m, i, 0), ..compute(m, i) }
}

/// The share of `x`'s value in `body` that the fusion uses, 0 to 1: all of the root;
/// of anything else, what its users take — a slice, dynamic slice or gather the part it
/// takes, an elementwise op, bitcast, reshape, transpose or copy as much as is used of
/// its own output, any other op all of it. An operand a fusion only slices or gathers
/// from is read in part (an embedding lookup reads its rows, not the table).
fn utilization(body: &HloComputation, x: &HloInstruction, memo: &mut Vec<(i64, f64)>, depth: u32) -> f64 {
    if x.id == body.root_id || depth > 32 {
        return 1.0;
    }
    if let Some(&(_, u)) = memo.iter().find(|(id, _)| *id == x.id) {
        return u;
    }
    let n = x.shape.element_count().max(1) as f64;
    let mut used = 0.0;
    for u in body.instructions.iter().filter(|u| u.operand_ids.contains(&x.id)) {
        let first = u.operand_ids.first() == Some(&x.id);
        let op = u.opcode.as_str();
        let same_size = u.shape.element_count() == x.shape.element_count();
        used += match op {
            // Updated in place: the part kept is not read, the part replaced not either.
            "dynamic-update-slice" if first => 0.0,
            "slice" | "dynamic-slice" | "gather" if first => {
                utilization(body, u, memo, depth + 1) * u.shape.element_count() as f64 / n
            }
            "bitcast" | "reshape" | "transpose" | "copy" if same_size => utilization(body, u, memo, depth + 1),
            _ if same_size && (ELEMENTWISE.contains(&op) || TRANSCENDENTAL.contains(&op)) => {
                utilization(body, u, memo, depth + 1)
            }
            _ => 1.0,
        };
        if used >= 1.0 {
            break;
        }
    }
    let used = used.min(1.0);
    memo.push((x.id, used));
    used
}

/// The bytes a fusion writes: its root's, where a `dynamic-update-slice` root (or
/// one in a root tuple) writes only its update — XLA runs those in place.
fn written_bytes(body: &HloComputation) -> u64 {
    let by_id = |id: i64| body.instructions.iter().find(|x| x.id == id);
    let one = |x: &HloInstruction| {
        if x.opcode == "dynamic-update-slice" {
            x.operand_ids.get(1).and_then(|&u| by_id(u)).map_or(0, |u| u.shape.bytes_size())
        } else {
            x.shape.bytes_size()
        }
    };
    match by_id(body.root_id) {
        Some(r) if r.opcode == "tuple" => {
            r.operand_ids.iter().filter_map(|&o| by_id(o)).map(one).fold(0, u64::saturating_add)
        }
        Some(r) => one(r),
        None => 0,
    }
}

/// FLOPs and transcendentals of one instruction (no bytes).
fn compute(m: &HloModule, i: &HloInstruction) -> Cost {
    let out = i.shape.element_count();
    let op = i.opcode.as_str();
    let operand = |k: usize| i.operand_ids.get(k).and_then(|&id| m.instruction_by_id(id)).map(|(_, o)| &o.shape);
    let flops = match op {
        "dot" => match (operand(0), &i.dot) {
            (Some(lhs), Some(d)) => dot_flops(out, lhs, &d.lhs_contracting),
            _ => 0,
        },
        "convolution" => conv_flops(i, first_output(&i.shape), operand(0), operand(1)),
        // A library convolution's dimension numbers and window are the forward
        // convolution's: its backward passes do the forward's work with the roles of
        // the arrays swapped (filter: the input and the output's gradient in, the
        // kernel's gradient out; input: the output's gradient and the kernel in).
        "custom-call" if is_conv(&i.custom_call_target) => {
            let result = Some(first_output(&i.shape));
            let t = &i.custom_call_target;
            let (out, input, kernel) = if t.contains("BackwardFilter") {
                (operand(1), operand(0), result)
            } else if t.contains("BackwardInput") {
                (operand(0), result, operand(1))
            } else {
                (result, operand(0), operand(1))
            };
            out.map_or(0, |out| conv_flops(i, out, input, kernel))
        }
        "custom-call" if is_fmha(&i.custom_call_target) => operand(0).map_or(0, |q| fmha_flops(i, q)),
        "custom-call" if is_gemm(&i.custom_call_target) => match (operand(0), gemm_contracting(&i.backend_config)) {
            // cuBLASLt returns (result, workspace): the result is the first element.
            (Some(lhs), Some(k)) => {
                let result =
                    if i.shape.is_tuple() { i.shape.tuple.first().map_or(0, Shape::element_count) } else { out };
                dot_flops(result, lhs, &k)
            }
            _ => 0,
        },
        "reduce" | "reduce-window" => {
            let input = operand(0).map_or(0, Shape::element_count);
            let per = reducer_ops(m, i);
            // The output of a tuple reduce: each element's count.
            let outputs = if i.shape.is_tuple() { i.shape.tuple.first().map_or(0, Shape::element_count) } else { out };
            input.saturating_sub(outputs).saturating_mul(per.max(1))
        }
        // Each element of the result (every array of a tuple) is its reducer applied
        // once more (the reduction of a participant's value into the others'): XLA's
        // count, as the group size is not in the shapes.
        "all-reduce" | "all-reduce-start" => i.shape.array_elements().saturating_mul(reducer_ops(m, i)),
        // The operands hold n × the result, n participants' values: each folded in
        // once, as for a reduce.
        "reduce-scatter" => {
            let input = m.operands(i).map(|o| o.shape.array_elements()).fold(0, u64::saturating_add);
            input.saturating_sub(i.shape.array_elements()).saturating_mul(reducer_ops(m, i))
        }
        _ if ELEMENTWISE.contains(&op) => out,
        _ => 0,
    };
    let transcendentals = if TRANSCENDENTAL.contains(&op) { out } else { 0 };
    Cost { flops, transcendentals, ..Cost::default() }
}

/// A library call's result: the first element of a tuple (the rest is scratch), the
/// shape itself otherwise.
fn first_output(shape: &Shape) -> &Shape {
    if shape.is_tuple() {
        shape.tuple.first().unwrap_or(shape)
    } else {
        shape
    }
}

/// A convolution's FLOPs: 2 × the output's batch and features × the kernel's input
/// features × the window taps that land on the input, summed over the output's
/// positions — taps over padding, or between the elements of a dilated input, do no
/// work. Without the input's dimension numbers: every tap of every output position.
fn conv_flops(i: &HloInstruction, out: &Shape, input: Option<&Shape>, kernel: Option<&Shape>) -> u64 {
    let (Some(c), Some(kernel)) = (&i.conv, kernel) else { return 0 };
    let size =
        |s: &Shape, d: i64| usize::try_from(d).ok().and_then(|d| s.dims.get(d)).copied().unwrap_or(1).max(0) as u64;
    let in_features = size(kernel, c.kernel_input_feature);
    let out_spatial: u64 = c.output_spatial.iter().map(|&d| size(out, d)).product();
    let per_position = out.element_count() / out_spatial.max(1);
    let taps = match input {
        Some(input) if c.input_spatial.len() == i.window.len() && c.output_spatial.len() == i.window.len() => i
            .window
            .iter()
            .zip(c.input_spatial.iter().zip(&c.output_spatial))
            .map(|(w, (&di, &d_out))| valid_taps(w, size(input, di), size(out, d_out)))
            .fold(1u64, u64::saturating_mul),
        _ => out_spatial.saturating_mul(c.kernel_spatial.iter().map(|&d| size(kernel, d)).product()),
    };
    2u64.saturating_mul(per_position).saturating_mul(in_features).saturating_mul(taps)
}

/// Over one spatial dimension: the (output position, window tap) pairs whose input
/// element exists — not padding, not a hole of a base-dilated input.
fn valid_taps(w: &WindowDim, input: u64, output: u64) -> u64 {
    let k = w.size.max(0) as u64;
    // Very long windows: every tap (no padding correction), to stay bounded.
    if output.saturating_mul(k) > 1 << 24 || input == 0 {
        return output.saturating_mul(k);
    }
    let (stride, wd, base) = (w.stride.max(1), w.window_dilation.max(1), w.base_dilation.max(1));
    let last = (input as i64 - 1) * base;
    let mut n = 0u64;
    for o in 0..output as i64 {
        for t in 0..k as i64 {
            let p = o * stride + t * wd - w.padding_low;
            n += u64::from(p >= 0 && p <= last && p % base == 0);
        }
    }
    n
}

/// The arithmetic operations of the computation `i` reduces with (1 if unknown).
fn reducer_ops(m: &HloModule, i: &HloInstruction) -> u64 {
    let n = i
        .called_computation_ids
        .first()
        .and_then(|&c| m.computation(c))
        .map_or(1, |c| c.instructions.iter().filter(|x| ELEMENTWISE.contains(&x.opcode.as_str())).count());
    n.max(1) as u64
}

/// 2 × output elements × the product of `lhs`'s contracting dimensions.
fn dot_flops(out: u64, lhs: &Shape, contracting: &[i64]) -> u64 {
    let k: u64 = contracting
        .iter()
        .map(|&d| usize::try_from(d).ok().and_then(|d| lhs.dims.get(d)).copied().unwrap_or(1).max(0) as u64)
        .product();
    2u64.saturating_mul(out).saturating_mul(k)
}

/// A library convolution's custom-call target (cuDNN's, also MIOpen's through XLA's
/// ROCm backend: `__cudnn$convForward`, `…BackwardInput`, `…BackwardFilter`, …).
fn is_conv(target: &str) -> bool {
    target.to_ascii_lowercase().contains("conv")
}

/// cuDNN's fused attention's custom-call target (`__cudnn$fmhaSoftmax`,
/// `__cudnn$fmhaSoftmaxBackward`, `…ScaleBiasSoftmax…`, `…Dropout…`).
fn is_fmha(target: &str) -> bool {
    target.starts_with("__cudnn$fmha")
}

/// `PrimitiveType` U8: a library's workspace.
const U8: i32 = 6;

/// FLOPs of one fused attention call whose query is `q` (see the module docs): 0
/// where its backend config gives no scores' shape.
fn fmha_flops(i: &HloInstruction, q: &Shape) -> u64 {
    let Ok(v) = serde_json::from_str::<Value>(&i.backend_config) else { return 0 };
    let Some(config) = v.get("cudnn_fmha_backend_config") else { return 0 };
    let number = |x: &Value| x.as_u64().or_else(|| x.as_str()?.parse().ok());
    let scores: Option<u64> = config
        .pointer("/intermediate_tensor_shape/dimensions")
        .and_then(Value::as_array)
        .and_then(|d| d.iter().map(number).try_fold(1u64, |a, n| a.checked_mul(n?)));
    let (Some(scores), Some(&head)) = (scores, q.dims.last()) else { return 0 };
    let products: u64 = if i.custom_call_target.contains("Backward") { 5 } else { 2 };
    let all = products.saturating_mul(2).saturating_mul(scores).saturating_mul(head.max(0) as u64);
    let causal = config.get("mask_type").and_then(Value::as_str).is_some_and(|m| m.contains("CAUSAL"));
    if causal {
        all / 2
    } else {
        all
    }
}

/// A library GEMM's custom-call target.
fn is_gemm(target: &str) -> bool {
    let t = target.to_ascii_lowercase();
    t.contains("gemm") || t.contains("matmul")
}

/// The lhs contracting dimensions in a GEMM's backend config (`dot_dimension_numbers`
/// in `gemm_backend_config`, as XLA:GPU writes it; numbers may be strings).
fn gemm_contracting(config: &str) -> Option<Vec<i64>> {
    let v: Value = serde_json::from_str(config).ok()?;
    let dims = v.get("gemm_backend_config").unwrap_or(&v).get("dot_dimension_numbers")?;
    let list = dims.get("lhs_contracting_dimensions")?.as_array()?;
    list.iter().map(|x| x.as_i64().or_else(|| x.as_str()?.parse().ok())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepscope_xspace::hlo::DotDims;

    fn shape(dims: &[i64]) -> Shape {
        Shape { element_type: 11, dims: dims.to_vec(), tuple: vec![] }
    }

    fn instr(id: i64, name: &str, opcode: &str, dims: &[i64], operands: &[i64]) -> HloInstruction {
        HloInstruction {
            id,
            name: name.into(),
            opcode: opcode.into(),
            shape: shape(dims),
            operand_ids: operands.to_vec(),
            ..HloInstruction::default()
        }
    }

    #[test]
    fn dot_elementwise_and_gemm() {
        let mut dot = instr(3, "dot", "dot", &[8, 32, 64], &[1, 2]);
        dot.dot = Some(DotDims { lhs_contracting: vec![2], rhs_contracting: vec![0], ..DotDims::default() });
        let mut gemm = instr(5, "gemm", "custom-call", &[], &[1, 2]);
        gemm.shape = Shape {
            element_type: 13,
            dims: vec![],
            tuple: vec![shape(&[256, 64]), Shape { element_type: 2, dims: vec![1 << 20], tuple: vec![] }],
        };
        gemm.custom_call_target = "__cublas$gemm".into();
        gemm.backend_config =
            r#"{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":["2"]}}}"#.into();
        let comp = HloComputation {
            name: "main".into(),
            id: 1,
            root_id: 4,
            is_fusion: false,
            instructions: vec![
                instr(1, "a", "parameter", &[8, 32, 16], &[]),
                instr(2, "b", "parameter", &[16, 64], &[]),
                dot,
                instr(4, "e", "exponential", &[8, 32, 64], &[3]),
                gemm,
            ],
        };
        let m = HloModule::new("m".into(), 1, 1, vec![comp]);
        let get = |n: &str| m.instruction(n).unwrap().1;
        let c = cost(&m, get("dot"));
        assert_eq!(c.flops, 2 * 8 * 32 * 64 * 16);
        assert_eq!(c.bytes, 4 * (8 * 32 * 16 + 16 * 64 + 8 * 32 * 64));
        let e = cost(&m, get("e"));
        assert_eq!((e.flops, e.transcendentals), (0, 8 * 32 * 64));
        let g = cost(&m, get("gemm"));
        assert_eq!(g.flops, 2 * 256 * 64 * 16);
        // The operands and the result; not the 1 MiB workspace.
        assert_eq!(g.bytes, 4 * (8 * 32 * 16 + 16 * 64 + 256 * 64));
    }

    #[test]
    fn tensor_core_eligibility_from_types_and_sizes() {
        let module = |lhs: &[i64], ty: i32| {
            let mut a = instr(1, "a", "parameter", lhs, &[]);
            a.shape.element_type = ty;
            let mut b = instr(2, "b", "parameter", &[lhs[1], 64], &[]);
            b.shape.element_type = ty;
            let mut dot = instr(3, "dot", "dot", &[lhs[0], 64], &[1, 2]);
            dot.dot = Some(DotDims { lhs_contracting: vec![1], rhs_contracting: vec![0], ..DotDims::default() });
            let add = instr(4, "add", "add", &[lhs[0], 64], &[3, 3]);
            let comp = HloComputation {
                name: "main".into(),
                id: 1,
                root_id: 4,
                is_fusion: false,
                instructions: vec![a, b, dot, add],
            };
            HloModule::new("m".into(), 1, 1, vec![comp])
        };
        let eligible = |m: &HloModule, n: &str| tensor_core_eligible(m, m.instruction(n).unwrap().1);
        // bf16 (16) with M, N, K multiples of 8; K = 36 is not; s32 (4) never; an add is no matrix op.
        assert_eq!(eligible(&module(&[128, 256], 16), "dot"), Some(true));
        assert_eq!(eligible(&module(&[128, 36], 16), "dot"), Some(false));
        assert_eq!(eligible(&module(&[128, 256], 4), "dot"), Some(false));
        assert_eq!(eligible(&module(&[128, 256], 11), "add"), None);
    }
}
