/**
 * The bench's figures as one SVG, drawn from its own numbers: log-log line charts, hand-written
 * SVG (no plotting dependency).
 */
import { bytes } from './format'

export interface Series {
  label: string
  color: string
  points: Array<{ x: number, y: number }>
  dashed?: boolean
}

export interface Chart {
  title: string
  xLabel: string
  yLabel: string
  series: Series[]
  /** Horizontal reference lines (goals). */
  references?: Array<{ label: string, y: number, color: string }>
  /** How x values are written (default: as byte sizes). */
  xFormat?: (value: number) => string
}

const PANEL_WIDTH = 480
const PANEL_HEIGHT = 320
const MARGIN = { left: 70, right: 20, top: 34, bottom: 74 }

const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

function yTick (value: number): string {
  if (value >= 1e6) return `${value / 1e6}M`
  if (value >= 1e3) return `${value / 1e3}k`
  return String(value)
}

/** Powers of ten covering [min, max] (log scale), widened to whole decades. */
function decades (min: number, max: number): [number, number] {
  const low = Math.floor(Math.log10(min))
  const high = Math.max(low + 1, Math.ceil(Math.log10(max)))
  return [low, high]
}

function panel (chart: Chart, originX: number, originY: number): string {
  const xs = chart.series.flatMap((series) => series.points.map((point) => point.x))
  const ys = [...chart.series.flatMap((series) => series.points.map((point) => point.y)), ...(chart.references ?? []).map((line) => line.y)]
    .filter((value) => value > 0 && Number.isFinite(value))
  const plotWidth = PANEL_WIDTH - MARGIN.left - MARGIN.right
  const plotHeight = PANEL_HEIGHT - MARGIN.top - MARGIN.bottom
  const [xLow, xHigh] = [Math.log2(Math.min(...xs)), Math.log2(Math.max(...xs))]
  const [yLow, yHigh] = decades(Math.min(...ys), Math.max(...ys))
  const xAt = (x: number) => originX + MARGIN.left + (xHigh === xLow ? plotWidth / 2 : (Math.log2(x) - xLow) / (xHigh - xLow) * plotWidth)
  const yAt = (y: number) => originY + MARGIN.top + plotHeight - (Math.log10(y) - yLow) / (yHigh - yLow) * plotHeight
  const parts: string[] = []
  const left = originX + MARGIN.left
  const top = originY + MARGIN.top
  parts.push(`<text x="${originX + PANEL_WIDTH / 2}" y="${originY + 20}" text-anchor="middle" font-weight="bold">${escape(chart.title)}</text>`)
  parts.push(`<rect x="${left}" y="${top}" width="${plotWidth}" height="${plotHeight}" fill="none" stroke="#999"/>`)
  for (let power = yLow; power <= yHigh; power++) {
    const y = yAt(10 ** power)
    parts.push(`<line x1="${left}" x2="${left + plotWidth}" y1="${y}" y2="${y}" stroke="#e4e4e4"/>`)
    parts.push(`<text x="${left - 6}" y="${y + 4}" text-anchor="end" font-size="11">${yTick(10 ** power)}</text>`)
  }
  const format = chart.xFormat ?? bytes
  for (const x of [...new Set(xs)].sort((a, b) => a - b)) {
    parts.push(`<line x1="${xAt(x)}" x2="${xAt(x)}" y1="${top}" y2="${top + plotHeight}" stroke="#f0f0f0"/>`)
    parts.push(`<text x="${xAt(x)}" y="${top + plotHeight + 14}" text-anchor="middle" font-size="10">${escape(format(x))}</text>`)
  }
  parts.push(`<text x="${left + plotWidth / 2}" y="${top + plotHeight + 30}" text-anchor="middle" font-size="11">${escape(chart.xLabel)}</text>`)
  parts.push(`<text transform="translate(${originX + 16} ${top + plotHeight / 2}) rotate(-90)" text-anchor="middle" font-size="11">${escape(chart.yLabel)}</text>`)
  for (const line of chart.references ?? []) {
    const y = yAt(line.y)
    parts.push(`<line x1="${left}" x2="${left + plotWidth}" y1="${y}" y2="${y}" stroke="${line.color}" stroke-dasharray="2 4" stroke-width="1.5"/>`)
    parts.push(`<text x="${left + plotWidth - 4}" y="${y - 4}" text-anchor="end" font-size="10" fill="${line.color}">${escape(line.label)}</text>`)
  }
  for (const series of chart.series) {
    const points = series.points.filter((point) => point.y > 0 && Number.isFinite(point.y))
    if (points.length === 0) continue
    const path = points.map((point) => `${xAt(point.x).toFixed(1)},${yAt(point.y).toFixed(1)}`).join(' ')
    parts.push(`<polyline points="${path}" fill="none" stroke="${series.color}" stroke-width="2"${series.dashed ? ' stroke-dasharray="6 3"' : ''}/>`)
    for (const point of points) parts.push(`<circle cx="${xAt(point.x).toFixed(1)}" cy="${yAt(point.y).toFixed(1)}" r="3" fill="${series.color}"/>`)
  }
  // Legend under the axis label: three to a row, or two when the labels are long.
  const columns = chart.series.some((series) => series.label.length > 18) ? 2 : 3
  chart.series.forEach((series, index) => {
    const column = index % columns
    const row = Math.floor(index / columns)
    const x = left + column * (plotWidth / columns)
    const y = top + plotHeight + 46 + row * 14
    parts.push(`<line x1="${x}" x2="${x + 16}" y1="${y - 4}" y2="${y - 4}" stroke="${series.color}" stroke-width="2"${series.dashed ? ' stroke-dasharray="6 3"' : ''}/>`)
    parts.push(`<text x="${x + 20}" y="${y}" font-size="10">${escape(series.label)}</text>`)
  })
  return parts.join('\n')
}

/** An SVG document with the charts in a grid, two per row. */
export function renderSvg (title: string, subtitle: string, charts: Chart[]): string {
  const columns = 2
  const rows = Math.ceil(charts.length / columns)
  const width = columns * PANEL_WIDTH
  const height = rows * PANEL_HEIGHT + 50
  const panels = charts.map((chart, index) => panel(chart, (index % columns) * PANEL_WIDTH, 50 + Math.floor(index / columns) * PANEL_HEIGHT))
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${width / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${escape(title)}</text>`,
    `<text x="${width / 2}" y="40" text-anchor="middle" font-size="11" fill="#555">${escape(subtitle)}</text>`,
    ...panels,
    '</svg>',
    ''
  ].join('\n')
}
