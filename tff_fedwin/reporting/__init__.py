"""Reports of finished runs: eval-curve plots and text summaries."""
