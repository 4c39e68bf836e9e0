"""The charts of gemmscope_plot.py, one module per chart kind (docs/charts.md); common.py holds what
they share: reading a result, the numbers gemmscope wrote into it, labels, footers, the chart file."""
