"""Running programs for real: the graph executor (`executor`), the measuring backends that time
operators for measured costs (`backends`; the cost model itself is `eqdsl.cost.measured`), and
`eqdsl doctor`'s checks (`doctor`)."""
