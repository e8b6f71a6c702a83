//! The few `tensorflow.ProfilerService` messages stepscope speaks, written from the
//! field numbers in the project's format notes (no generated code, no protoc).

/// `tensorflow.ProfileOptions`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfileOptions {
    #[prost(bool, tag = "1")]
    pub include_dataset_ops: bool,
    #[prost(uint32, tag = "2")]
    pub host_tracer_level: u32,
    #[prost(uint32, tag = "3")]
    pub device_tracer_level: u32,
    #[prost(uint32, tag = "4")]
    pub python_tracer_level: u32,
    /// Always 1: version 0 makes servers ignore the tracer levels.
    #[prost(uint32, tag = "5")]
    pub version: u32,
    /// 0 unspecified, 1 CPU, 2 GPU, 3 TPU.
    #[prost(int32, tag = "6")]
    pub device_type: i32,
    #[prost(bool, tag = "7")]
    pub enable_hlo_proto: bool,
    #[prost(uint64, tag = "8")]
    pub start_timestamp_ns: u64,
    #[prost(uint64, tag = "9")]
    pub duration_ms: u64,
    #[prost(string, tag = "10")]
    pub repository_path: String,
}

/// `tensorflow.ProfileRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfileRequest {
    #[prost(uint64, tag = "1")]
    pub duration_ms: u64,
    #[prost(uint64, tag = "2")]
    pub max_events: u64,
    #[prost(string, repeated, tag = "3")]
    pub tools: Vec<String>,
    #[prost(message, optional, tag = "4")]
    pub opts: Option<ProfileOptions>,
    #[prost(string, tag = "5")]
    pub repository_root: String,
    #[prost(string, tag = "6")]
    pub session_id: String,
    #[prost(string, tag = "7")]
    pub host_name: String,
    #[prost(bool, tag = "9")]
    pub emit_xspace: bool,
}

/// `tensorflow.ProfileResponse`, without its `tool_data` (field 6), which stepscope
/// does not use and so skips unread. The XSpace (field 8) is an embedded message on
/// the wire; it is kept as raw bytes so it can be decoded and written without
/// re-encoding, and as `Bytes`, a view into the received message rather than a copy
/// of it (a trace can be most of a GiB).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfileResponse {
    #[prost(bool, tag = "7")]
    pub empty_trace: bool,
    #[prost(bytes = "bytes", tag = "8")]
    pub xspace: prost::bytes::Bytes,
}
