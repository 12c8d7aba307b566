//! stub
pub struct HashJoin;
pub struct HashJoinConfig;
pub struct HashJoinStats;
pub enum PartitionLayout { Regions }
