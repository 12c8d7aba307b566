//! stub
pub struct MergeJoin;
pub struct MergeJoinConfig;
pub struct MergeJoinStats;
