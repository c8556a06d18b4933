package ibv

// SGE is one scatter/gather element (struct ibv_sge): Length bytes at
// virtual address Addr of the memory region whose local key is LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}
