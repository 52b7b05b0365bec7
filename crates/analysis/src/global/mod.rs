//! Global multiprocessor tests on m identical CPUs: EDF (GFB, BAK, BCL, iterative BCL,
//! Devi–Anderson tardiness) and fixed priority (Bertogna–Cirinei response-time analysis).
